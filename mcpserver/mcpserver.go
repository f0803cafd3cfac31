// Package mcpserver serves a tally.Client to one agent as an MCP server: one
// tool per ledger operation, with input and output JSON schemas inferred from
// the structs below. Every tool calls the facade method the command line
// calls and decides nothing on its own. The actor is the client's, fixed for
// the server's life.
//
// A successful call's structured content (also given as JSON text) is the
// command line's --json object: the result's fields and "ok": true; the
// tool's output schema describes exactly that. A failed call is a tool error
// (IsError) whose one text content is the command line's --json error object,
// {"ok":false,"error":{"code":...,"message":...,"retryable":...,<details>}},
// with no structured content (see errorObjects).
package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"runtime/debug"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tally-dev/tally"
	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/lease"
)

// Options configure New.
type Options struct {
	// PID is recorded as the holder process of the server's claims, for
	// dead-holder takeover: the agent's process. 0 means the server's parent.
	PID int
	// Version is reported to the client as serverInfo.version; empty means
	// the tally module's version in this binary's build info.
	Version string
	Log     *slog.Logger // the SDK's and the renewer's log (nil: none)
	// Renew, if set, keeps the leases this server claims renewed while the
	// agent lives (see RenewOptions).
	Renew *RenewOptions
}

// RenewOptions configure auto-renew. The server tracks each lease it grants
// (claim, renew) with its epoch and renews it through Client.Renew every
// Interval, by default a third of its TTL. It stops tracking a lease on
// release, fail or done, and when a renewal is refused (a retryable error is
// retried at the next tick). Once Alive reports false, the agent is gone:
// nothing is renewed any more, so its leases expire or are taken over.
type RenewOptions struct {
	// Client renews; give a second client on the same repository so that
	// renewals never wait behind a tool call (a lock that waits, a run).
	// nil means the server's client.
	Client *tally.Client
	// Interval, if positive, replaces ttl/3 and is also the polling period
	// (otherwise one second). Renewals run on the wall clock.
	Interval time.Duration
	// Alive reports whether the agent still runs. nil means: process PID
	// runs and the server's parent has not changed since New.
	Alive func() bool
}

// Server is an MCP server for one tally client.
type Server struct {
	*mcp.Server
	c       *tally.Client
	mu      sync.Mutex // serializes the tool handlers' calls on c
	opt     Options
	leases  map[lease.CellRef]*tracked // leases to renew; nil without auto-renew
	leaseMu sync.Mutex                 // guards leases
}

// tracked is a lease the renewer keeps alive.
type tracked struct {
	epoch int64
	every time.Duration
	due   time.Time
}

// New returns a server with all tools registered; Run serves it.
func New(c *tally.Client, o Options) *Server {
	if o.PID == 0 {
		o.PID = os.Getppid()
	}
	if o.Version == "" {
		o.Version = moduleVersion()
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if r := o.Renew; r != nil && r.Alive == nil {
		pid, ppid := o.PID, os.Getppid()
		rr := *r
		rr.Alive = func() bool { return tally.ProcessAlive(pid) && os.Getppid() == ppid }
		o.Renew = &rr
	}
	s := &Server{c: c, opt: o}
	if o.Renew != nil {
		s.leases = map[lease.CellRef]*tracked{}
	}
	s.Server = mcp.NewServer(&mcp.Implementation{Name: "tally", Version: o.Version}, &mcp.ServerOptions{
		Logger: o.Log,
		Instructions: "tally leases the cells of a plan to agents, acting as " + c.Actor + ". Loop: next, claim " +
			"(keep its epoch), do the work (run records evidence), renew before expires_at, then done with " +
			"the commit (or release / fail). Errors carry a code; retryable ones (LEASE-HELD, CONFLICT, " +
			"NO-READY-CELL) may succeed later unchanged.",
	})
	s.AddReceivingMiddleware(errorObjects)
	s.tools()
	return s
}

// moduleVersion is the version of the tally module as this binary was built
// with it: as its main module ("(devel)" from a work tree), or as a
// dependency (replaced by a directory: "(devel)"), else "(unknown)".
func moduleVersion() string {
	path := reflect.TypeFor[tally.Client]().PkgPath() // the module's root package
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, m := range append([]*debug.Module{&info.Main}, info.Deps...) {
			if m.Path != path {
				continue
			}
			if m.Replace != nil {
				m = m.Replace
			}
			if m.Version == "" {
				return "(devel)"
			}
			return m.Version
		}
	}
	return "(unknown)"
}

// Run serves the client on t until it disconnects or ctx ends, renewing
// leases meanwhile if so configured.
func (s *Server) Run(ctx context.Context, t mcp.Transport) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if s.opt.Renew != nil {
		done := make(chan struct{})
		defer func() { cancel(); <-done }()
		go func() { defer close(done); s.renewLoop(ctx) }()
	}
	return s.Server.Run(ctx, t)
}

// call runs a facade call on the server's client, one at a time; an error
// becomes an *errs.Error, as the command line reports it.
func (s *Server) call(f func(c *tally.Client) error) error {
	return s.lend(func() error { return f(s.c) })
}

// lend runs f while it holds the client (tally.Client.Run borrows it so).
func (s *Server) lend(f func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := f(); err != nil {
		return errs.From(err)
	}
	return nil
}

// track starts (or updates) renewing a lease this server was granted.
func (s *Server) track(ref lease.CellRef, l *lease.Lease) {
	if s.leases == nil || l == nil {
		return
	}
	every := s.opt.Renew.Interval
	if every <= 0 {
		every = time.Duration(l.TTLSeconds) * time.Second / 3
	}
	s.leaseMu.Lock()
	s.leases[ref] = &tracked{epoch: l.Epoch, every: every, due: time.Now().Add(every)}
	s.leaseMu.Unlock()
}

// untrack stops renewing the lease on ref if it is at epoch.
func (s *Server) untrack(ref lease.CellRef, epoch int64) {
	if s.leases == nil {
		return
	}
	s.leaseMu.Lock()
	if t := s.leases[ref]; t != nil && t.epoch == epoch {
		delete(s.leases, ref)
	}
	s.leaseMu.Unlock()
}

// renewLoop renews the tracked leases as they fall due until ctx ends or
// the agent is gone; Alive is asked on every tick and before each renewal.
func (s *Server) renewLoop(ctx context.Context) {
	r := s.opt.Renew
	c, mu := r.Client, new(sync.Mutex)
	if c == nil {
		c, mu = s.c, &s.mu
	}
	tick := r.Interval
	if tick <= 0 {
		tick = time.Second
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, d := range append(s.due(), nil) { // nil: ask Alive on a tick without renewals
			if !r.Alive() {
				s.opt.Log.Warn("auto-renew: the agent is gone; renewals stop", "pid", s.opt.PID)
				s.leaseMu.Lock()
				clear(s.leases)
				s.leaseMu.Unlock()
				return
			}
			if d != nil {
				mu.Lock()
				_, err := c.Renew(d.Wave, d.Cell, d.epoch, 0)
				mu.Unlock()
				s.renewed(d, err)
			}
		}
	}
}

// dueLease is a tracked lease due for renewal.
type dueLease struct {
	lease.CellRef
	epoch int64
}

// due lists the tracked leases due for renewal.
func (s *Server) due() (out []*dueLease) {
	now := time.Now()
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	for ref, l := range s.leases {
		if !now.Before(l.due) {
			out = append(out, &dueLease{ref, l.epoch})
		}
	}
	return out
}

// renewed records the outcome of a renewal: the lease is due again an
// interval later; a retryable error is retried at the next tick; a refusal
// ends the tracking.
func (s *Server) renewed(d *dueLease, err error) {
	switch e := errs.From(err); {
	case err == nil:
		s.leaseMu.Lock()
		if l := s.leases[d.CellRef]; l != nil && l.epoch == d.epoch {
			l.due = time.Now().Add(l.every)
		}
		s.leaseMu.Unlock()
	case e.Retryable():
		s.opt.Log.Warn("auto-renew: will retry", "cell", d.String(), "epoch", d.epoch, "error", e.Error())
	default:
		s.opt.Log.Warn("auto-renew: refused; no longer renewed", "cell", d.String(), "epoch", d.epoch, "error", e.Error())
		s.untrack(d.CellRef, d.epoch)
	}
}

// errorObjects turns the error of a failed tool call into the error object
// (tally.ErrorObject), given as JSON text only. A result's structured
// content must match the tool's output schema, which describes the success
// object, and clients check it even on error results (the TypeScript SDK's
// callTool throws -32602 on a mismatch); with no structured content they
// return the result. Handlers return *errs.Error; any other error comes from
// the SDK checking the arguments: USAGE.
func errorObjects(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		r, ok := res.(*mcp.CallToolResult)
		if err != nil || !ok || !r.IsError || r.GetError() == nil {
			return res, err
		}
		e, ok := r.GetError().(*errs.Error)
		if !ok {
			e = errs.New(errs.Usage, "%v", r.GetError())
		}
		text, jerr := json.Marshal(tally.ErrorObject(e))
		if jerr != nil {
			return res, err
		}
		r.StructuredContent, r.Content = nil, []mcp.Content{&mcp.TextContent{Text: string(text)}}
		return r, nil
	}
}

// schemaOpts adjust inference to the types' JSON: hashes marshal as hex
// strings, raw messages as any JSON value.
var schemaOpts = &jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[chain.Hash]():      {Type: "string"},
	reflect.TypeFor[json.RawMessage](): {},
}}

// inputRange is the range an integer input property admits, by its name in
// every tool; the bounds are the rules' own. A value outside is refused as
// USAGE by the schema check, before the handler runs.
type inputRange struct{ min, max *float64 }

func bound(v int) *float64 { f := float64(v); return &f }

var inputRanges = map[string]inputRange{
	"ttl":             {bound(lease.TTLMin), bound(lease.TTLMax)},
	"epoch":           {min: bound(1)}, // epochs count from 1
	"epochs":          {min: bound(1)}, // each item
	"wait_seconds":    {min: bound(0)},
	"timeout_seconds": {min: bound(0)},
	"n":               {min: bound(0)},
}

// withDefaults is an input some of whose omitted properties mean a value of
// the rules (by property name); the schema states it as the default, which
// the SDK also fills in.
type withDefaults interface{ defaults() map[string]any }

// inputSchema is the schema inferred from In with the ranges of inputRanges
// and In's defaults.
func inputSchema[In any]() (*jsonschema.Schema, error) {
	in, err := jsonschema.ForType(reflect.TypeFor[In](), schemaOpts)
	if err != nil {
		return nil, err
	}
	if d, ok := any(*new(In)).(withDefaults); ok {
		for name, v := range d.defaults() {
			b, err := json.Marshal(v)
			if err != nil || in.Properties[name] == nil {
				return nil, fmt.Errorf("default of %q: %v", name, err)
			}
			in.Properties[name].Default = b
		}
	}
	for name, p := range in.Properties {
		r, ok := inputRanges[name]
		if !ok {
			continue
		}
		if p.Items != nil {
			p = p.Items
		}
		p.Minimum, p.Maximum = r.min, r.max
	}
	return in, nil
}

// okTrue is the "ok" of every success object.
var okTrue any = true

// outputSchema is the schema of the success object for Out (a pointer to a
// struct): its fields, and "ok": true.
func outputSchema[Out any]() (*jsonschema.Schema, error) {
	out, err := jsonschema.ForType(reflect.TypeFor[Out]().Elem(), schemaOpts)
	if err != nil {
		return nil, err
	}
	if out.Properties == nil {
		out.Properties = map[string]*jsonschema.Schema{}
	}
	out.Properties["ok"] = &jsonschema.Schema{Type: "boolean", Const: &okTrue}
	out.Required = append(out.Required, "ok")
	return out, nil
}

// add registers a tool whose input schema is inferred from In (see
// inputSchema) and whose result is the success object of the handler's Out
// (see outputSchema), as the command line's --json prints it. The handler's
// errors become tool errors.
func add[In any, Out any](s *Server, name, desc string, h func(context.Context, In) (Out, error)) {
	in, err := inputSchema[In]()
	if err != nil {
		panic(name + ": input schema: " + err.Error())
	}
	out, err := outputSchema[Out]()
	if err != nil {
		panic(name + ": output schema: " + err.Error())
	}
	mcp.AddTool(s.Server, &mcp.Tool{Name: name, Description: desc, InputSchema: in, OutputSchema: out},
		func(ctx context.Context, _ *mcp.CallToolRequest, in In) (*mcp.CallToolResult, map[string]any, error) {
			o, err := h(ctx, in)
			if err != nil {
				return nil, nil, errs.From(err)
			}
			obj, err := tally.ResultObject(o)
			if err != nil {
				return nil, nil, errs.Wrap(errs.Internal, err, "%s: result", name)
			}
			return nil, obj, nil
		})
}
