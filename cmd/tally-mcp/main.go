// Command tally-mcp is tally's MCP server: `tally mcp`, the documented entry
// point, execs it with the flags it was given. It is a program of its own so
// that the MCP SDK and what it links (JSON Schema, encoding/gob, net/http,
// OAuth) stay out of the tally binary every short-lived command starts.
// It takes tally's global flags and mcp's, and serves the one repository they
// name until the agent disconnects or signals it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/pflag"

	"github.com/tally-dev/tally"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/internal/cliopt"
	"github.com/tally-dev/tally/mcpserver"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run serves as args say and returns the exit code: 0 when the agent
// disconnected or signalled, else the class of the error that stopped it.
func run(args []string, stdout, stderr io.Writer) int {
	g := cliopt.NewGlobals()
	var m cliopt.MCP
	fs := pflag.NewFlagSet(cliopt.MCPProgram, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	g.AddFlags(fs)
	m.AddFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: %s [flags] (what tally mcp runs)\n\n%s\n\nFlags:\n%s", cliopt.MCPProgram, cliopt.MCPHelp, fs.FlagUsages())
	}
	err := fs.Parse(args)
	switch {
	case errors.Is(err, pflag.ErrHelp):
		return 0
	case err != nil:
		err = errs.New(errs.Usage, "%v", err)
	case fs.NArg() > 0:
		err = errs.New(errs.Usage, "%s takes no arguments, got %q", cliopt.MCPProgram, fs.Args())
	default:
		err = serve(g, m, stderr)
	}
	if err == nil {
		return 0
	}
	e := errs.From(err)
	if *g.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		enc.Encode(tally.ErrorObject(e))
	} else {
		fmt.Fprintf(stderr, "%s: %s: %s\n", cliopt.MCPProgram, e.Code, e.Message)
	}
	return int(e.Class())
}

// serve opens the repository and serves it on stdin/stdout. Compaction runs
// in a goroutine of this long-lived process (no detached tally gc), and is
// waited for before it exits.
func serve(g cliopt.Globals, m cliopt.MCP, stderr io.Writer) error {
	c, err := g.Open(true, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	defer c.L.WaitMaintenance()
	o := mcpserver.Options{PID: os.Getppid(), Version: cliopt.ReadBuildVersion().String(),
		Log: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if m.AutoRenew {
		rc, err := g.Open(true, nil) // renewals never wait behind a tool call
		if err != nil {
			return err
		}
		defer rc.Close()
		defer rc.L.WaitMaintenance()
		o.Renew = &mcpserver.RenewOptions{Client: rc, Interval: m.RenewInterval}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return mcpserver.New(c, o).Run(ctx, &mcp.StdioTransport{})
}
