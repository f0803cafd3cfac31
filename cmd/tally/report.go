package main

import (
	"bufio"
	"fmt"
	"github.com/tally-dev/tally"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/report"
)

func (a *app) reportCmd() *cobra.Command {
	var out, since, until string
	var opt report.Options
	cmd := &cobra.Command{
		Use:   "report [--out FILE] [--wave W] [--since T] [--until T]",
		Short: "write a self-contained HTML report: verification, lease timeline, summaries",
		Long: `report replays this clone's ledger from genesis through the verifier and
writes one HTML file that needs nothing else (no network, no external assets):
the verification header (through which seq, Merkle root, signed entries,
saved checkpoints), a timeline with one lane per cell (grouped by wave) and per
locked path pattern, each lease a bar from grant to release, expiry, failure,
takeover or done, takeovers marked with the prior holder, renewals as ticks,
per-actor and per-wave summaries, and the entries behind each bar.
--since and --until (RFC 3339) keep the entries in that window and the
leases overlapping it; --wave keeps one wave's cells.
If the ledger does not verify, the report is still written, with the failure
first and only the entries before it, and tally exits 3 with the failure.
Run tally sync first to report on a remote's ledger.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if opt.Since, err = timeFlag("since", since); err != nil {
				return err
			}
			if opt.Until, err = timeFlag("until", until); err != nil {
				return err
			}
			if !opt.Since.IsZero() && !opt.Until.IsZero() && opt.Until.Before(opt.Since) {
				return usageErr("--until is before --since")
			}
			if out == "-" && a.jsonOut {
				return usageErr("--out - writes the page to stdout, which --json needs for its object")
			}
			return a.withClient(false, func(c *tally.Client) error {
				m, err := report.Build(c, opt)
				if err != nil {
					return err
				}
				if err := writeReport(out, a.stdout, m); err != nil {
					return err
				}
				if f := m.Verify.Failure; f != nil {
					e := errs.New(f.Code, "%s (report written to %s, showing the %d entries before the failure)", f.Message, out, m.Verify.Entries)
					if f.Seq >= 0 {
						e = e.With("seq", f.Seq)
					}
					return e.With("out", out)
				}
				res := map[string]any{"out": out, "entries": m.Verify.Entries, "root": m.Verify.Root,
					"lanes": len(m.Lanes), "leases": len(m.Bars), "shown_entries": len(m.Entries)}
				return a.emit(res, func(w io.Writer) {
					if out != "-" {
						fmt.Fprintf(w, "report of %d verified entries (root %s): %s\n", m.Verify.Entries, m.Verify.Root, out)
					}
				})
			})
		},
	}
	cmd.Flags().StringVarP(&out, "out", "o", "tally-report.html", "write the page to `FILE` (- for stdout)")
	cmd.Flags().StringVar(&opt.Wave, "wave", "", "show only the cells of wave `W`")
	cmd.Flags().StringVar(&since, "since", "", "start the window at `T` (RFC 3339)")
	cmd.Flags().StringVar(&until, "until", "", "end the window at `T` (RFC 3339)")
	return cmd
}

// timeFlag parses an optional RFC 3339 flag value.
func timeFlag(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return t, usageErr("--%s must be RFC 3339: %v", name, err)
	}
	return t, nil
}

// writeReport renders m to path (stdout for "-"), replacing the file whole.
func writeReport(path string, stdout io.Writer, m *report.Model) error {
	if path == "-" {
		return report.Render(stdout, m)
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return errs.New(errs.Usage, "%v", err)
	}
	w := bufio.NewWriter(f)
	err = report.Render(w, m)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}
