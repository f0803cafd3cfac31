// Package cliopt is what tally's two programs share of the command line:
// tally, and tally-mcp, the MCP server that `tally mcp` execs. The server is
// a program of its own so that the MCP SDK (and with it JSON Schema,
// encoding/gob, net/http and OAuth) is not linked into, nor initialized by,
// every short-lived tally process. Both programs take the same global flags
// and turn them into the same client, here.
package cliopt

import (
	"os"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/spf13/pflag"

	"github.com/tally-dev/tally"
	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/ledger"
)

// Globals points at the variables the global flags set. tally binds them to
// its app's fields; tally-mcp to NewGlobals' own.
type Globals struct {
	Dir, Actor, Namespace, SignKey, Remote *string
	Local, JSON, Quiet                     *bool
}

// NewGlobals returns Globals bound to fresh variables.
func NewGlobals() Globals {
	return Globals{Dir: new(string), Actor: new(string), Namespace: new(string), SignKey: new(string),
		Remote: new(string), Local: new(bool), JSON: new(bool), Quiet: new(bool)}
}

// AddFlags defines the global flags on fs.
func (g Globals) AddFlags(fs *pflag.FlagSet) {
	fs.StringVarP(g.Dir, "repo", "C", ".", "run as if started in `PATH`")
	fs.BoolVar(g.JSON, "json", false, "print exactly one JSON object on stdout")
	fs.BoolVarP(g.Quiet, "quiet", "q", false, "show no progress on stderr (progress shows only on a terminal, and never with --json)")
	fs.StringVar(g.Actor, "actor", "", "who is acting (else $TALLY_ACTOR, else git user.email)")
	fs.StringVar(g.Namespace, "namespace", "", "ref namespace of the ledger (default refs/tally, or $TALLY_NAMESPACE)")
	fs.StringVar(g.Remote, "remote", "", "work through git remote `NAME` (or URL): appends are compare-and-swap pushes there (default: git config tally.remote)")
	fs.BoolVar(g.Local, "local", false, "work on the local ledger even if tally.remote is set")
	fs.StringVar(g.SignKey, "sign-key", "", "sign ledger commits with this OpenSSH ed25519 private key `FILE` (else $TALLY_SIGNING_KEY, else git's user.signingkey when gpg.format=ssh)")
}

// Open opens the repository the flags and the TALLY_* variables name, a
// flag winning over its variable: the one place that turns them into the
// facade's options. A client that will append (acting) is refused early,
// USAGE, when no actor can be found. maintain starts background compaction
// (nil: in a goroutine of this process).
func (g Globals) Open(acting bool, maintain ledger.Maintainer) (*tally.Client, error) {
	now, err := EnvClock()
	if err != nil {
		return nil, err
	}
	c, err := tally.Open(*g.Dir, tally.Options{
		Actor:      flagOrEnv(*g.Actor, "TALLY_ACTOR"),
		Namespace:  flagOrEnv(*g.Namespace, "TALLY_NAMESPACE"),
		SigningKey: flagOrEnv(*g.SignKey, "TALLY_SIGNING_KEY"),
		Remote:     *g.Remote, Local: *g.Local, Now: now, Maintain: maintain})
	if err != nil {
		return nil, err
	}
	if acting && c.Actor == "" {
		c.Close()
		return nil, errs.New(errs.Usage, "no actor: pass --actor, set TALLY_ACTOR or git config user.email")
	}
	return c, nil
}

// flagOrEnv is a global flag's value, else its environment variable's.
func flagOrEnv(flag, variable string) string {
	if flag != "" {
		return flag
	}
	return os.Getenv(variable)
}

// EnvClock is the clock of this invocation: $TALLY_NOW (RFC 3339) if set, so
// tests and hooks can fix the time, else the wall clock.
func EnvClock() (func() time.Time, error) {
	s := os.Getenv("TALLY_NOW")
	if s == "" {
		return time.Now, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return nil, errs.New(errs.Usage, "TALLY_NOW must be RFC 3339: %v", err)
	}
	if !chain.TimeInRange(t) {
		// Before 1970 a commit time is negative, which git refuses; an
		// offset can also carry a year-9999 (or year-1970) time out of range.
		return nil, errs.New(errs.Usage, "TALLY_NOW %s is %s in UTC, outside %s..%s, the times an entry can carry",
			s, t.UTC().Format(time.RFC3339Nano), chain.FirstTime, chain.LastTime).With("limit", chain.RangeLimit(t))
	}
	return func() time.Time { return t }, nil
}

// BuildVersion describes this binary from its build info: the module
// version ("(devel)" for a build from a work tree, vX.Y.Z for go install
// module@version) and the VCS revision the go command stamped, if any.
type BuildVersion struct {
	Version  string `json:"version"`
	Revision string `json:"revision,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
}

// ReadBuildVersion reads this binary's BuildVersion.
func ReadBuildVersion() BuildVersion {
	v := BuildVersion{Version: "(unknown)", Go: runtime.Version()}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	v.Version = info.Main.Version
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// String is the one-line form: the version, and for a "(devel)" build the
// revision (with "+dirty" for a modified work tree) when known; a pseudo-
// version already names its revision.
func (v BuildVersion) String() string {
	s := v.Version
	if v.Revision != "" && v.Version == "(devel)" {
		s += " " + v.Revision
		if v.Modified {
			s += "+dirty"
		}
	}
	return s
}
