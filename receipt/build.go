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

// Build returns the receipt body for a done entry on snapshot s: the commit and
// its tree, the base, the paths changed from base to commit, and the evidence
// recorded for the lease. The rules then decide whether it is acceptable.
func Build(l *ledger.Ledger, s *ledger.Snapshot, req Request) (*lease.DoneBody, error) {
	repo := l.Repo
	db, err := repo.Objects()
	if err != nil {
		return nil, err
	}
	rev := req.Commit
	if rev == "" {
		rev = "HEAD"
	}
	commit, err := repo.ResolveCommit(rev)
	if err != nil {
		return nil, errs.Wrap("COMMIT-MISSING", err, "receipt commit")
	}
	c, err := db.ReadCommit(commit)
	if err != nil {
		return nil, errs.Wrap("COMMIT-MISSING", err, "receipt commit %s", commit)
	}
	body := &lease.DoneBody{EpochBody: req.EpochBody, Commit: commit.String(), Tree: c.Tree.String(),
		Changed: []string{}, Evidence: []lease.Evidence{}}
	if req.Base != "" {
		b, err := repo.ResolveCommit(req.Base)
		if err != nil {
			return nil, errs.Wrap("COMMIT-MISSING", err, "receipt base")
		}
		body.Base = b.String()
	} else if cell, err := lease.ReadCell(s, req.Wave, req.Cell); err == nil && cell.Lease != nil {
		body.Base = cell.Lease.Base
	}
	var baseTree gitstore.ObjectID
	if body.Base != "" {
		id, _ := gitstore.ParseObjectID(body.Base)
		bc, err := db.ReadCommit(id)
		if err != nil {
			return nil, errs.Wrap("COMMIT-MISSING", err, "receipt base %s", body.Base)
		}
		baseTree = bc.Tree
	}
	if body.Changed, err = gitstore.DiffTrees(db, baseTree, c.Tree); err != nil {
		return nil, errs.Wrap("CORRUPT", err, "diff %s..%s", body.Base, commit)
	}
	if body.Changed == nil {
		body.Changed = []string{}
	}
	pending, err := PendingEvidence(l.LocalDir, req.Wave, req.Cell, req.Epoch)
	if err != nil {
		return nil, err
	}
	body.Evidence = append(body.Evidence, pending...)
	if req.EvidenceFile != "" {
		extra, err := readEvidenceFile(req.EvidenceFile)
		if err != nil {
			return nil, err
		}
		for i := range extra {
			extra[i].Epoch = req.Epoch
		}
		body.Evidence = append(body.Evidence, extra...)
	}
	return body, nil
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
