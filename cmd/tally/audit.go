package main

import "github.com/spf13/cobra"

func (a *app) auditCmd() *cobra.Command { return &cobra.Command{Use: "audit"} }
