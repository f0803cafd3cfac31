package receipt

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/ledger"
)

// Request is what `tally done` asks for.
type Request struct {
	lease.EpochBody
	Commit       string // revision, default HEAD
	Base         string // revision, default the HEAD recorded at claim time
	EvidenceFile string // extra evidence (a JSON array of lease.Evidence or one object)
}

// Prepared is a receipt before the ledger state is known: what the request
// names in the repository (commit, tree, an explicit base) and the evidence.
// Reading those takes time and does not depend on the ledger, so it is done
// once, before the writer lock, however often the append is rebuilt.
type Prepared struct {
	l       *ledger.Ledger
	body    lease.DoneBody    // without the default base and the changed paths
	tree    gitstore.ObjectID // of the commit
	changed map[string][]string
	taken   []string // the pending evidence files in body
}

// Prepare reads the commit and evidence a done request names.
func Prepare(l *ledger.Ledger, req Request) (*Prepared, error) {
	rev := req.Commit
	if rev == "" {
		rev = "HEAD"
	}
	commit, tree, err := resolve(l, rev)
	if err != nil {
		return nil, err
	}
	p := &Prepared{l: l, tree: tree, changed: map[string][]string{}, body: lease.DoneBody{EpochBody: req.EpochBody,
		Commit: commit.String(), Tree: tree.String(), Evidence: []lease.Evidence{}}}
	if req.Base != "" {
		b, err := l.Repo.ResolveCommit(req.Base)
		if err != nil {
			return nil, errs.Wrap(errs.CommitMissing, err, "receipt base")
		}
		p.body.Base = b.String()
	}
	pending, taken, err := PendingEvidence(l.Files, req.Wave, req.Cell, req.Epoch)
	if err != nil {
		return nil, err
	}
	p.taken = taken
	p.body.Evidence = append(p.body.Evidence, pending...)
	if req.EvidenceFile != "" {
		extra, err := readEvidenceFile(req.EvidenceFile)
		if err != nil {
			return nil, err
		}
		for i := range extra {
			extra[i].Epoch = req.Epoch
		}
		p.body.Evidence = append(p.body.Evidence, extra...)
	}
	return p, nil
}

// Taken removes the pending evidence the receipt holds, once it is appended.
func (p *Prepared) Taken() { ClearEvidence(p.taken) }

// Draft is the receipt as Prepare read it: the body without the default
// base and the changed paths, which Body decides on a state. Resume makes
// it a Prepared again in another process.
func (p *Prepared) Draft() lease.DoneBody { return p.body }

// Resume is the Prepared of a receipt another process of the clone
// prepared (its Draft), for an append this process makes for it: what it
// names is in the clone's shared objects, and its evidence is in the body,
// so none is read or taken here.
func Resume(l *ledger.Ledger, body lease.DoneBody) (*Prepared, error) {
	tree, err := gitstore.ParseObjectID(body.Tree)
	if err != nil || tree.String() != body.Tree {
		return nil, errs.New(errs.Usage, "receipt tree %q is not 40 lowercase hex digits", body.Tree)
	}
	return &Prepared{l: l, body: body, tree: tree, changed: map[string][]string{}}, nil
}

// Body returns the receipt body for a done entry on snapshot s: the base
// defaults to the HEAD recorded when the lease was claimed, and the changed
// paths are those from base to commit. The rules then decide whether it is
// acceptable.
func (p *Prepared) Body(s *ledger.Snapshot) (*lease.DoneBody, error) {
	body := p.body
	if body.Base == "" {
		if cell, err := lease.ReadCell(s, body.Wave, body.Cell); err == nil && cell.Lease != nil {
			body.Base = cell.Lease.Base
		}
	}
	changed, ok := p.changed[body.Base]
	if !ok {
		var err error
		if changed, err = changedPaths(p.l, body.Base, p.tree); err != nil {
			return nil, err
		}
		p.changed[body.Base] = changed
	}
	body.Changed = changed
	return &body, nil
}

// readEvidenceFile reads extra evidence: one evidence object or an array of
// them, in the form tally run records (lease.Evidence), decoded strictly.
// Anything else is USAGE: a member the form does not have, a missing argv,
// exit_code or started_at, or a start time that is not RFC 3339. Unrelated
// JSON must not become a receipt's "command exited 0".
func readEvidenceFile(path string) ([]lease.Evidence, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, errs.New(errs.Usage, "evidence file: %v", err)
	}
	b = bytes.TrimSpace(b)
	var raws []json.RawMessage
	if len(b) > 0 && b[0] == '{' {
		raws = []json.RawMessage{b}
	} else if err := json.Unmarshal(b, &raws); err != nil {
		return nil, errs.New(errs.Usage, "evidence file %s: want an evidence object or an array of them: %v", path, err)
	}
	list := make([]lease.Evidence, 0, len(raws))
	for i, raw := range raws {
		ev, err := decodeEvidence(raw)
		if err != nil {
			return nil, errs.New(errs.Usage, "evidence file %s, item %d: %v", path, i, err).With("item", i)
		}
		list = append(list, ev)
	}
	return list, nil
}

// decodeEvidence decodes one evidence object strictly (readEvidenceFile).
func decodeEvidence(raw []byte) (lease.Evidence, error) {
	var ev lease.Evidence
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return ev, err
	}
	for _, m := range []string{"argv", "exit_code", "started_at"} {
		if _, ok := members[m]; !ok {
			return ev, fmt.Errorf("no %q: evidence names the command, its exit code and when it started", m)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ev); err != nil {
		return ev, err
	}
	if len(ev.Argv) == 0 || ev.Argv[0] == "" {
		return ev, fmt.Errorf("argv is empty")
	}
	if _, err := chain.ParseTime(ev.StartedAt); err != nil {
		return ev, fmt.Errorf("started_at: %v", err)
	}
	return ev, nil
}
