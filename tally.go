// Package tally is the library facade of tally: one Client per repository and
// actor, with the operations the command line and the MCP server share. The
// command line adds flags and formatting, the MCP server adds JSON schemas;
// neither decides anything on its own.
package tally

import (
	"os"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/ledger"
)

// Options configure Open.
type Options struct {
	// Actor is who acts; required for operations that append.
	Actor string
	// Namespace is the ref namespace (default refs/tally).
	Namespace string
}

// Client operates on one repository's ledger as one actor.
type Client struct {
	L     *ledger.Ledger
	Actor string
	host  string
}

// Open opens the ledger of the repository containing dir.
func Open(dir string, opt Options) (*Client, error) {
	l, err := ledger.Open(dir, ledger.Options{Namespace: opt.Namespace})
	if err != nil {
		return nil, err
	}
	host, err := os.Hostname()
	if err != nil {
		l.Close()
		return nil, err
	}
	return &Client{L: l, Actor: opt.Actor, host: host}, nil
}

// Close releases the repository.
func (c *Client) Close() error { return c.L.Close() }

// EntryRef identifies an appended entry.
type EntryRef struct {
	Seq  uint64     `json:"seq"`
	Hash chain.Hash `json:"hash"`
}

// Appended is the common result of every operation that appends an entry.
type Appended struct {
	Entry   EntryRef `json:"entry"`
	Commit  string   `json:"commit"`
	Summary string   `json:"summary"`
}

func appendedOf(ap *ledger.Appended) Appended {
	return Appended{Entry: EntryRef{ap.Entry.Seq, ap.Hash}, Commit: ap.Commit.String(), Summary: ap.Result.Summary}
}

// append appends an entry as the client's actor.
func (c *Client) append(build ledger.BuildFunc) (*ledger.Appended, error) {
	if c.Actor == "" {
		return nil, errs.New("USAGE", "no actor: pass --actor, set TALLY_ACTOR or git config user.email")
	}
	return c.L.Append(c.Actor, build)
}
