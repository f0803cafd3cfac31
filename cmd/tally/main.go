// Command tally is a git-native lease ledger and receipt tool for many agents
// working in one repository. See README.md.
package main

import "os"

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }
