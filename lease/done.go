package lease

import (
	"fmt"
	"sort"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/pathspec"
)

// Digest describes a captured output stream.
type Digest struct {
	Size   int64  `json:"size"`
	BLAKE3 string `json:"blake3"`
	SHA256 string `json:"sha256"`
}

// Evidence records one command run under a lease (by `tally run`).
type Evidence struct {
	Argv       []string `json:"argv"`
	ExitCode   int      `json:"exit_code"`
	StartedAt  string   `json:"started_at"`
	DurationMS int64    `json:"duration_ms"`
	Stdout     Digest   `json:"stdout"`
	Stderr     Digest   `json:"stderr"`
	Epoch      int64    `json:"epoch"`
}

// DoneBody is the body of a "done" entry: the receipt binding a finished cell
// to a commit. Changed lists the paths that differ between Base and Commit,
// as computed by the writer from the repository.
type DoneBody struct {
	EpochBody
	Commit   string     `json:"commit"`
	Tree     string     `json:"tree"`
	Base     string     `json:"base"`
	Changed  []string   `json:"changed"`
	Evidence []Evidence `json:"evidence"`
}

// OutOfScope returns the changed paths not matched by any of the cell's path
// patterns. A cell without patterns has no scope limit.
func OutOfScope(patterns, changed []string) []string {
	if len(patterns) == 0 {
		return nil
	}
	var out []string
	for _, p := range changed {
		if !pathspec.MatchAny(patterns, p) {
			out = append(out, p)
		}
	}
	return out
}

func (r *rule) done() (string, any, error) {
	var b DoneBody
	if err := r.body(&b); err != nil {
		return "", nil, err
	}
	if !chain.IsLowerHex(b.Commit, 40) || !chain.IsLowerHex(b.Tree, 40) || (b.Base != "" && !chain.IsLowerHex(b.Base, 40)) {
		return "", nil, errs.New(errs.Usage, "done: commit, tree and base must be full lowercase object ids")
	}
	if !sort.StringsAreSorted(b.Changed) {
		return "", nil, errs.New(errs.Usage, "done: changed paths must be sorted")
	}
	for _, ev := range b.Evidence {
		if ev.Epoch != b.Epoch {
			return "", nil, errs.New(errs.Usage, "done: evidence recorded under epoch %d, not %d", ev.Epoch, b.Epoch)
		}
	}
	c, err := r.holder(b.EpochBody, true)
	if err != nil {
		return "", nil, err
	}
	if out := OutOfScope(c.Paths, b.Changed); len(out) > 0 {
		return "", nil, errs.New(errs.ReceiptScope, "%s/%s may change only %v; these paths are outside: %v", b.Wave, b.Cell, c.Paths, out).
			With("paths", out).With("scope", c.Paths)
	}
	c.Lease = nil
	c.Receipt = &Ref{Seq: r.e.Seq, Commit: b.Commit}
	c.History = append(c.History, r.e.Seq)
	if err := r.t.setCellState(c, Done, false); err != nil {
		return "", nil, err
	}
	// Dependents whose deps are now all done become ready.
	for _, ref := range c.Dependents {
		w, id := splitDep(c.Wave, ref)
		d, err := r.t.cell(w, id)
		if err != nil {
			return "", nil, err
		}
		if d.State != Pending {
			continue
		}
		blocked, err := r.t.unfinishedDeps(d)
		if err != nil {
			return "", nil, err
		}
		if len(blocked) == 0 {
			if err := r.t.setCellState(d, Pending, true); err != nil {
				return "", nil, err
			}
		}
	}
	ref := ReceiptRef{Seq: r.e.Seq, Wave: b.Wave, Cell: b.Cell, Epoch: b.Epoch, Commit: b.Commit, Tree: b.Tree}
	chunked, err := r.t.chunked()
	if err != nil {
		return "", nil, err
	}
	for _, key := range []string{ReceiptKey(b.Commit), TreeKey(b.Tree)} {
		if err := r.t.addReceipt(key, ref, chunked); err != nil {
			return "", nil, err
		}
	}
	return fmt.Sprintf("done %s/%s epoch %d at %.12s", b.Wave, b.Cell, b.Epoch, b.Commit), &ref, nil
}
