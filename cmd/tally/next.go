package main

import (
	"fmt"
	"github.com/tally-dev/tally"
	"io"

	"github.com/spf13/cobra"
)

func (a *app) nextCmd() *cobra.Command {
	var waveFlag string
	cmd := &cobra.Command{
		Use:   "next [WAVE | --wave WAVE]",
		Short: "list the cells claimable now, in the order claim --next takes them",
		Args:  args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			wave, err := waveArg(argv, waveFlag)
			if err != nil {
				return err
			}
			return a.withClient(false, func(c *tally.Client) error {
				ready, err := c.Next(wave)
				if err != nil {
					return err
				}
				return a.emitView(c, map[string]any{"ready": ready}, func(w io.Writer) {
					for _, c := range ready {
						note := ""
						if c.Expired {
							note = "  (lease expired)"
						}
						fmt.Fprintf(w, "%s/%s%s\n", c.Wave, c.Cell, note)
					}
				})
			})
		},
	}
	cmd.Flags().StringVar(&waveFlag, "wave", "", "only this `WAVE` (the same as giving it as the argument)")
	return cmd
}

// waveArg is the wave a view is limited to, given as its argument or with
// --wave (status and next take both spellings); "" for all waves. Two
// different waves are USAGE.
func waveArg(argv []string, flag string) (string, error) {
	if len(argv) == 0 {
		return flag, nil
	}
	if flag != "" && flag != argv[0] {
		return "", usageErr("give the wave once: argument %q or --wave %q", argv[0], flag)
	}
	return argv[0], nil
}
