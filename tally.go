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
	"time"

	"github.com/tally-dev/tally/anchor"
	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/identity"
	"github.com/tally-dev/tally/ledger"
)

// Options configure Open. Nothing in the facade reads the environment: the
// command line turns TALLY_* variables into these fields.
type Options struct {
	// Actor is who acts; required for operations that append. Empty means
	// git's user.email.
	Actor string
	// Namespace is the ref namespace (default refs/tally).
	Namespace string
	// Remote, if set, makes the named git remote (or URL) the point of truth:
	// appends are compare-and-swap pushes there, views read its ledger.
	// Empty means git config tally.remote, unless Local is set.
	Remote string
	// Local ignores tally.remote.
	Local bool
	// Now is the clock (default the wall clock): entry times and every
	// lease's expiry are judged by it.
	Now func() time.Time
	// Maintain runs background compaction in another process (the command
	// line starts a detached `tally gc`); nil runs it in a goroutine of this
	// one, see ledger.WaitMaintenance.
	Maintain ledger.Maintainer
	// SigningKey is an OpenSSH ed25519 private key file that signs every
	// ledger commit. Empty means git's user.signingkey when gpg.format is
	// ssh, else no signing.
	SigningKey string
	// CheckpointKeys are checkpoint verifier keys (anchor.ParseVerifier) the
	// client trusts besides git config's multi-valued tally.checkpointKey:
	// with any, the first fetch of a remote's ledger starts from the largest
	// stored checkpoint one of them signed (ledger.Options.Trust).
	CheckpointKeys []string
}

// Client operates on one repository's ledger as one actor. Its source,
// chosen once in Open, is where the ledger of truth lives: every view,
// append, verify and wait goes through it.
type Client struct {
	L     *ledger.Ledger
	Actor string
	src   ledger.Source
	host  string
	seen  *Verified // the state the last view read, verified
	// requestGuard, when set, makes this client serve sequenced requests
	// (SetRequestGuard).
	requestGuard RequestGuard
}

// ClaimPath says how a client's claim --next reaches the ledger (Path: one
// of the constants below) and why (FORMAT.md §9b, *Client*).
type ClaimPath struct {
	Path string `json:"path"`
	Why  string `json:"why"`
	// Ops are, on the sequenced path, the ops sent to the sequencer (the
	// others are compare-and-swap pushes): those of SequencedOps the
	// remote's offer lists, or claim --next alone where it lists none.
	Ops []string `json:"ops,omitempty"`
	// unknown: the clone has not fetched the remote's ledger yet, so
	// whether it offers a sequencer is not known (a claim fetches first).
	unknown bool
	// offered: sequenced because of the remote's offer, not by
	// tally.sequencer, so a server that no longer sequences (its offer
	// stale here) sends the claim back to compare-and-swap.
	offered bool
}

// The claim paths.
const (
	PathLocal     = "local"            // no remote: the local ledger
	PathSequenced = "sequenced"        // a request to the remote's sequencer
	PathCAS       = "compare-and-swap" // an entry pushed with a compare-and-swap
)

// ClaimPath is how this client's claim --next (and the other ops of
// SequencedOps the remote serves) reaches the ledger, and why,
// as of now: a fetch may have brought the remote's offer since Open.
func (c *Client) ClaimPath() ClaimPath {
	return claimPath(c.L, c.L.Repo.Config(), c.Remote(), c.L.Signs())
}

// claimPath chooses how claim --next reaches remote's ledger (FORMAT.md
// §9b): never sequenced for a client that signs (the server cannot sign
// for it); else as git config tally.sequencer says, when set; else
// sequenced when the remote offers a sequencer (its ledger.SequencerRef,
// fetched with its ledger, is here).
func claimPath(l *ledger.Ledger, cfg *gitstore.Config, remote string, signs bool) ClaimPath {
	switch v, set := cfg.Value(ledger.SequencerConfig); {
	case remote == "":
		return ClaimPath{Path: PathLocal, Why: "no remote"}
	case signs:
		return ClaimPath{Path: PathCAS, Why: "this clone signs its entries, which a sequencer cannot do for it"}
	case set && gitTrue(v):
		return ClaimPath{Path: PathSequenced, Why: ledger.SequencerConfig + " is true", Ops: servedOps(l, remote)}
	case set:
		return ClaimPath{Path: PathCAS, Why: ledger.SequencerConfig + " is " + v}
	case l.OffersSequencer(remote):
		return ClaimPath{Path: PathSequenced, Why: "remote " + remote + " offers a sequencer (" + ledger.SequencerRef + "); " + ledger.SequencerConfig + "=false opts out", Ops: servedOps(l, remote), offered: true}
	case !l.Fetched(remote):
		return ClaimPath{Path: PathCAS, Why: "not known yet whether remote " + remote + " offers a sequencer: this clone has not fetched its ledger", unknown: true}
	}
	return ClaimPath{Path: PathCAS, Why: "remote " + remote + " offers no sequencer (no " + ledger.SequencerRef + " when this clone last fetched; a server that stops sequencing withdraws it)"}
}

// servedOps are the ops remote's sequencer serves that this version sends:
// those of SequencedOps its offer lists, claim --next alone where it lists
// none (an offer from before the list, or none: a server sequencing by
// tally.sequencer=true here serves claim --next at least).
func servedOps(l *ledger.Ledger, remote string) []string {
	listed := l.OfferedOps(remote)
	if listed == nil {
		return []string{OpClaimNext}
	}
	ops := []string{}
	for _, op := range SequencedOps {
		if slices.Contains(listed, op) {
			ops = append(ops, op)
		}
	}
	return ops
}

// gitTrue reports whether v is one of git's spellings of true.
func gitTrue(v string) bool {
	return slices.Contains([]string{"true", "yes", "on", "1"}, strings.ToLower(v))
}

// Verified names the state a view answered from: every entry through seq
// Through verified, whose hash is Head. Views never answer from a state
// that does not verify (they refuse with its integrity code), so this is
// also the tip the answer describes.
type Verified struct {
	Through uint64     `json:"through"`
	Head    chain.Hash `json:"head"`
	// From is the trusted checkpoint verification began at when it did not
	// begin at genesis: entries before it were not fetched nor replayed.
	From *ledger.CheckpointStart `json:"from,omitempty"`
}

// CheckpointKeyConfig is the git config variable (multi-valued) of the
// checkpoint verifier keys a clone trusts (Options.CheckpointKeys).
const CheckpointKeyConfig = "tally.checkpointKey"

// Verified returns the state the client's last view read (nil before any).
func (c *Client) Verified() *Verified { return c.seen }

// Remote names the remote the client works through ("" in local mode).
func (c *Client) Remote() string { return c.src.Remote() }

// Open opens the ledger of the repository containing dir.
func Open(dir string, opt Options) (*Client, error) {
	repo, err := ledger.OpenRepo(dir)
	if err != nil {
		return nil, err
	}
	cfg := repo.Config()
	actor := opt.Actor
	if actor == "" {
		actor, _ = cfg.Value("user.email")
	}
	key := opt.SigningKey
	if format, _ := cfg.Value("gpg.format"); key == "" && format == "ssh" {
		key, _ = cfg.Value("user.signingkey")
	}
	var signer *identity.Signer
	if key != "" {
		if signer, err = loadSigner(key); err != nil {
			repo.Close()
			return nil, errs.New(errs.Usage, "signing key: %v", err)
		}
	}
	host, err := os.Hostname()
	if err != nil {
		repo.Close()
		return nil, err
	}
	var trust ledger.CheckpointTrust
	if keys := append(cfg.Values(CheckpointKeyConfig), opt.CheckpointKeys...); len(keys) > 0 {
		for _, k := range keys {
			if _, _, err := anchor.ParseVerifier(k, "tally"); err != nil { // the name only matters for ssh keys, whose signer chose it
				repo.Close()
				return nil, errs.From(err).With("config", CheckpointKeyConfig)
			}
		}
		trust = anchor.Trust(keys)
	}
	c := &Client{Actor: actor, host: host}
	l, err := ledger.New(repo, ledger.Options{Namespace: opt.Namespace, Now: opt.Now, Signer: signer, Maintain: opt.Maintain, Trust: trust, Intents: c.decodeIntent})
	if err != nil {
		repo.Close()
		return nil, err
	}
	remote := opt.Remote
	if remote == "" && !opt.Local {
		remote, _ = cfg.Value("tally.remote")
	}
	c.L, c.src = l, l.Local()
	if remote != "" {
		c.src = l.RemoteSource(remote)
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
	if err := c.needActor(); err != nil {
		return nil, err
	}
	return c.src.Append(c.Actor, builds)
}

// needActor refuses an append by a client without an actor.
func (c *Client) needActor() error {
	if c.Actor == "" {
		return errs.New(errs.Usage, "no actor: pass Options.Actor or set git config user.email")
	}
	return nil
}

// head returns the state views read: the source's tip, verified (in remote
// mode fetched first), and notes it for Verified.
func (c *Client) head() (*ledger.Snapshot, error) {
	s, err := c.src.Head()
	if err != nil {
		return nil, err
	}
	c.seen = &Verified{Through: s.Meta.Size - 1, Head: s.Meta.Head, From: c.L.ShallowStart()}
	return s, nil
}
