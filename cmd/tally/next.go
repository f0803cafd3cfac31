package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/tally-dev/tally/lease"
)

func (a *app) nextCmd() *cobra.Command {
	var wave string
	cmd := &cobra.Command{
		Use:   "next [--wave W]",
		Short: "list the cells claimable now, in the order claim --next takes them",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := a.open()
			if err != nil {
				return err
			}
			defer l.Close()
			s, err := l.Head()
			if err != nil {
				return err
			}
			waves := []string{wave}
			if wave == "" {
				p, err := lease.ReadPlan(s)
				if err != nil {
					return err
				}
				waves = p.Waves
			}
			ready := []lease.Candidate{}
			for _, w := range waves {
				r, err := lease.Ready(s, w, l.Now(), 0)
				if err != nil {
					return err
				}
				ready = append(ready, r...)
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
