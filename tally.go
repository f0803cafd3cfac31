// Package tally is the library facade of tally: one Client per repository and
// actor, with the operations the command line and the MCP server share. The
// command line adds flags and formatting, the MCP server adds JSON schemas;
// neither decides anything on its own.
package tally

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/identity"
	"github.com/tally-dev/tally/ledger"
)

// Options configure Open.
type Options struct {
	// Actor is who acts; required for operations that append. Empty means
	// $TALLY_ACTOR, else git's user.email.
	Actor string
	// Namespace is the ref namespace (default refs/tally).
	Namespace string
	// Remote, if set, makes the named git remote (or URL) the point of truth:
	// appends are compare-and-swap pushes there, views read its ledger.
	// Empty means git config tally.remote, unless Local is set.
	Remote string
	// Local ignores tally.remote.
	Local bool
	// Maintainer is the tally executable, for background maintenance in a
	// detached process (the command line sets it; a library user that leaves
	// it empty gets a goroutine instead, see ledger.WaitMaintenance).
	Maintainer string
	// SigningKey is an OpenSSH ed25519 private key file that signs every
	// ledger commit. Empty means $TALLY_SIGNING_KEY, else git's
	// user.signingkey when gpg.format is ssh, else no signing.
	SigningKey string
}

// Client operates on one repository's ledger as one actor. Its source,
// chosen once in Open, is where the ledger of truth lives: every view,
// append, verify and wait goes through it.
type Client struct {
	L     *ledger.Ledger
	Actor string
	src   ledger.Source
	host  string
	// sequencer: claim --next goes to the remote's sequencer (git config
	// tally.sequencer; never for a signing client, FORMAT.md §9b).
	sequencer bool
}

// Remote names the remote the client works through ("" in local mode).
func (c *Client) Remote() string { return c.src.Remote() }

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
	c := &Client{L: l, Actor: opt.Actor, host: host}
	l.Maintainer = opt.Maintainer
	cfg := l.Repo.Config()
	remote := opt.Remote
	if remote == "" && !opt.Local {
		remote, _ = cfg.Value("tally.remote")
	}
	c.src = l.Local()
	if remote != "" {
		c.src = l.RemoteSource(remote)
	}
	if c.Actor == "" {
		c.Actor = os.Getenv("TALLY_ACTOR")
	}
	if c.Actor == "" {
		c.Actor, _ = cfg.Value("user.email")
	}
	key := opt.SigningKey
	if key == "" {
		key = os.Getenv("TALLY_SIGNING_KEY")
	}
	if format, _ := cfg.Value("gpg.format"); key == "" && format == "ssh" {
		key, _ = cfg.Value("user.signingkey")
	}
	if key != "" {
		if l.Signer, err = loadSigner(key); err != nil {
			l.Close()
			return nil, errs.New("USAGE", "signing key: %v", err)
		}
	}
	if v, _ := cfg.Value(ledger.SequencerConfig); remote != "" && l.Signer == nil && slices.Contains([]string{"true", "yes", "on", "1"}, strings.ToLower(v)) { // git's spellings of true
		c.sequencer = true
	}
	return c, nil
}

// loadSigner reads a signing key named like git's user.signingkey: a path,
// possibly starting with ~/, to a private key or to its .pub beside it.
func loadSigner(path string) (*identity.Signer, error) {
	if rest, ok := strings.CutPrefix(path, "~/"); ok {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, err
		}
		path = filepath.Join(home, rest)
	}
	path = strings.TrimSuffix(path, ".pub")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return identity.ParseSigner(b, path)
}

// repoDir is where git commands about this repository run.
func (c *Client) repoDir() string {
	if c.L.Repo.WorkTree != "" {
		return c.L.Repo.WorkTree
	}
	return c.L.Repo.GitDir
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

// append appends an entry as the client's actor, locally or through the remote.
func (c *Client) append(build ledger.BuildFunc) (*ledger.Appended, error) {
	out, err := c.appendBatch([]ledger.BuildFunc{build})
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

func (c *Client) appendBatch(builds []ledger.BuildFunc) ([]*ledger.Appended, error) {
	if c.Actor == "" {
		return nil, errs.New("USAGE", "no actor: pass --actor, set TALLY_ACTOR or git config user.email")
	}
	return c.src.Append(c.Actor, builds)
}

// head returns the state views read: the source's tip (in remote mode
// fetched and verified).
func (c *Client) head() (*ledger.Snapshot, error) { return c.src.Head() }
