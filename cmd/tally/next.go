package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

func (a *app) nextCmd() *cobra.Command {
	var wave string
	cmd := &cobra.Command{
		Use:   "next [--wave W]",
		Short: "list the cells claimable now, in the order claim --next takes them",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client(false)
			if err != nil {
				return err
			}
			defer c.Close()
			ready, err := c.Next(wave)
			if err != nil {
				return err
			}
			return a.emit(map[string]any{"ready": ready}, func(w io.Writer) {
				for _, c := range ready {
					note := ""
					if c.Expired {
						note = "  (lease expired)"
					}
					fmt.Fprintf(w, "%s/%s%s\n", c.Wave, c.Cell, note)
				}
			})
		},
	}
	cmd.Flags().StringVar(&wave, "wave", "", "only this `WAVE`")
	return cmd
}
