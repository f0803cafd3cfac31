package main

import (
	"fmt"
	"github.com/tally-dev/tally"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

func (a *app) deadlocksCmd() *cobra.Command {
	var brk bool
	cmd := &cobra.Command{
		Use:   "deadlocks [--break]",
		Short: "find cycles of waits on path locks; --break preempts one victim per cycle",
		Long: `deadlocks builds the wait-for graph (an edge from each live waiter to each
actor whose holds deny it the pattern it waits for) and lists its cycles, the
strongly connected components found with Tarjan's algorithm.

The victim of a cycle is its member of lowest role priority; among equals, the
one whose name sorts last (byte order). With --break one "break" entry clears
the victims' waits and releases all their path locks (each epoch moves on);
cycles left among the rest are broken the same way in the same entry. verify
recomputes the cycles and victims when it replays the entry.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withClient(brk, func(c *tally.Client) error {
				res, err := c.Deadlocks(brk)
				if err != nil {
					return err
				}
				return a.emit(res, func(w io.Writer) {
					if len(res.Cycles) == 0 {
						fmt.Fprintln(w, "no deadlock")
					}
					for _, cy := range res.Cycles {
						fmt.Fprintf(w, "deadlock among: %s\n", strings.Join(cy, ", "))
					}
					if len(res.Victims) > 0 {
						fmt.Fprintf(w, "victims: %s\n", strings.Join(res.Victims, ", "))
					}
					if res.Break != nil {
						printAppended(w, &res.Break.Appended)
						for _, p := range res.Break.Released {
							fmt.Fprintf(w, "released: %s epoch %d on %s\n", p.Actor, p.Epoch, p.Pattern)
						}
					}
				})
			})
		},
	}
	cmd.Flags().BoolVar(&brk, "break", false, "append a break entry preempting the victims")
	return cmd
}
