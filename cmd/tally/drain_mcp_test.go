package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/internal/testrepo"
)

// mcpAgent is a drain worker served by its own long-lived `tally mcp`
// (tally-mcp) over stdio, as an agent runs it.
type mcpAgent struct {
	session *mcp.ClientSession
	cmd     *exec.Cmd
}

// mcpAgents makes drain's workers `tally mcp` servers of bin in dir.
func mcpAgents(bin, dir string) func(string) (drainAgent, error) {
	return mcpAgentsOf(func(actor string) *exec.Cmd { return exec.Command(bin, "-C", dir, "--actor", actor, "mcp") })
}

// mcpAgentsOf makes drain's workers the MCP servers serve(actor) runs.
func mcpAgentsOf(serve func(actor string) *exec.Cmd) func(string) (drainAgent, error) {
	return func(actor string) (drainAgent, error) {
		cmd := serve(actor)
		cmd.Env = testrepo.Env()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s, err := mcp.NewClient(&mcp.Implementation{Name: "drain", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			return nil, fmt.Errorf("connect to tally mcp: %v", err)
		}
		return &mcpAgent{s, cmd}, nil
	}
}

// call calls a tool and returns its outcome as the proc of the command with
// --json: the one text content, and as exit code its error's class.
func (a *mcpAgent) call(tool string, args map[string]any) proc {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	res, err := a.session.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	p := proc{Wall: time.Since(start)}
	if err != nil {
		p.Err = fmt.Errorf("%s %v: %v", tool, args, err)
		return p
	}
	if len(res.Content) == 1 {
		if text, ok := res.Content[0].(*mcp.TextContent); ok {
			p.Stdout = text.Text
		}
	}
	if json.Unmarshal([]byte(p.Stdout), &p.JSON) != nil || p.JSON == nil {
		p.Err = fmt.Errorf("%s %v: the content is not one JSON object: %#v", tool, args, res.Content)
		return p
	}
	if res.IsError {
		p.Code = int(errs.ClassOfCode(errs.Code(p.errCode())))
	}
	return p
}

func (a *mcpAgent) claim(wave string) proc {
	return a.call("claim", map[string]any{"next": true, "wave": wave, "wait_seconds": 120})
}

func (a *mcpAgent) done(wave, cell string, epoch int64, next bool) proc {
	args := map[string]any{"wave": wave, "cell": cell, "epoch": epoch}
	if next {
		args["next"], args["next_wave"], args["wait_seconds"] = true, wave, 120
	}
	return a.call("done", args)
}

func (a *mcpAgent) status(wave string) proc { return a.call("status", map[string]any{"wave": wave}) }

// close disconnects, which ends the server, and returns its rusage (with
// the git processes it waited for).
func (a *mcpAgent) close() (procUsage, error) {
	err := a.session.Close()
	ps := a.cmd.ProcessState
	if ps == nil {
		return procUsage{}, fmt.Errorf("tally mcp did not exit: %v", err)
	}
	return usageOf(ps), err
}
