package main

import (
	"context"
	"github.com/tally-dev/tally"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/tally-dev/tally/mcpserver"
)

func (a *app) mcpCmd() *cobra.Command {
	var autoRenew bool
	var interval time.Duration
	cmd := &cobra.Command{
		Use:   "mcp [--auto-renew]",
		Short: "serve the ledger to one agent as an MCP server on stdin/stdout",
		Long: `mcp serves tally's operations as MCP tools over stdio, for an agent to call:
status, next, show, claim, renew, release, fail, done, run, lock, unlock,
locks, verify, log. Each calls what the command of the same name calls and
returns its --json object ("ok": true) as structured content; a refusal is a
tool error whose text content is the --json error object (code, message,
retryable, details), with no structured content. The actor is fixed for the server (--actor, else
$TALLY_ACTOR, else git user.email). Claims record the server's parent, the
agent, as the holder process, so a lease can be reclaimed once it is gone.

  --auto-renew  renew the leases this server claimed at a third of their TTL
                while the agent (the server's parent) runs; stop tracking a
                lease on release, fail, done or a refused renewal

Logs go to stderr.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			debug.SetGCPercent(100) // a long-running server collects garbage as usual
			return a.withClient(true, func(c *tally.Client) error {
				defer c.L.WaitMaintenance()
				o := mcpserver.Options{PID: os.Getppid(), Version: readBuildVersion().String(), Log: slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
				if autoRenew {
					rc, err := a.client(true) // renewals never wait behind a tool call
					if err != nil {
						return err
					}
					defer rc.Close()
					defer rc.L.WaitMaintenance()
					o.Renew = &mcpserver.RenewOptions{Client: rc, Interval: interval}
				}
				ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
				defer stop()
				return mcpserver.New(c, o).Run(ctx, &mcp.StdioTransport{})
			})
		},
	}
	cmd.Flags().BoolVar(&autoRenew, "auto-renew", false, "keep the leases this server claimed renewed while the agent runs")
	cmd.Flags().DurationVar(&interval, "renew-interval", 0, "with --auto-renew, renew every `DURATION` instead of at ttl/3 (for tests)")
	cmd.Flags().MarkHidden("renew-interval")
	return cmd
}
