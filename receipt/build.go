package receipt

import (
	"bytes"
	"encoding/json"
	"os"

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
			return nil, errs.Wrap("COMMIT-MISSING", err, "receipt base")
		}
		p.body.Base = b.String()
	}
	pending, taken, err := PendingEvidence(l.LocalDir, req.Wave, req.Cell, req.Epoch)
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

func readEvidenceFile(path string) ([]lease.Evidence, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, errs.New("USAGE", "evidence file: %v", err)
	}
	b = bytes.TrimSpace(b)
	var list []lease.Evidence
	if len(b) > 0 && b[0] == '{' {
		var one lease.Evidence
		err = json.Unmarshal(b, &one)
		list = []lease.Evidence{one}
	} else {
		err = json.Unmarshal(b, &list)
	}
	if err != nil {
		return nil, errs.New("USAGE", "evidence file %s: %v", path, err)
	}
	return list, nil
}
