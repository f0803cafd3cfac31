package cliopt

import (
	"time"

	"github.com/spf13/pflag"
)

// MCPProgram is the MCP server's program, which `tally mcp` execs, and
// MCPInstall the command that installs it beside tally.
const (
	MCPProgram = "tally-mcp"
	MCPInstall = "CGO_ENABLED=0 go install github.com/tally-dev/tally/cmd/...@latest"
)

// MCPHelp is the help of `tally mcp`, which tally-mcp prints too.
const MCPHelp = `mcp serves tally's operations as MCP tools over stdio, for an agent to call:
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

The server is the program ` + MCPProgram + `, which tally mcp runs in its own place
(same process, arguments, environment and stdio): it is looked for beside
tally's executable, then on PATH; without it tally mcp is refused with
NOT-INSTALLED (install both: ` + MCPInstall + `).

Logs go to stderr.`

// MCP holds the server's own flags. tally defines them too, for its help
// and to refuse a malformed command line before it execs the server.
type MCP struct {
	AutoRenew     bool
	RenewInterval time.Duration
}

// AddFlags defines the server's flags on fs.
func (m *MCP) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&m.AutoRenew, "auto-renew", false, "keep the leases this server claimed renewed while the agent runs")
	fs.DurationVar(&m.RenewInterval, "renew-interval", 0, "with --auto-renew, renew every `DURATION` instead of at ttl/3 (for tests)")
	fs.MarkHidden("renew-interval")
}
