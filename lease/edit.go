package lease

// The path rule of edits, commits and pushes: a changed path is refused when
// another actor holds it. The edit guard and the pre-commit hook ask it
// through EditCheck (the writing actor known by name); the push hooks
// through HoldsOn, a commit's author standing for the actor (Policy.IsAuthor).

import (
	"strings"
	"time"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/pathspec"
)

// HoldsOn returns the holds among holds whose pattern matches path, both
// in Unicode normalization form C (pathspec.Compose), and with ignoreCase
// (git's core.ignorecase) case folded, as such a file system would open the
// same file for both. It is the one test of whether a hold covers a
// changed path.
func HoldsOn(holds []PathHold, path string, ignoreCase bool) []PathHold {
	path = pathspec.Compose(path)
	if ignoreCase {
		path = pathspec.Fold(path)
	}
	dir := path + "/"
	var out []PathHold
	for _, h := range holds {
		pat := pathspec.Compose(h.Pattern)
		if ignoreCase {
			pat = pathspec.Fold(pat)
		}
		// Every path a pattern matches, plus "/", begins with the pattern's
		// key: most holds are dismissed here without compiling them.
		if strings.HasPrefix(dir, pathspec.Key(pat)) && pathspec.Match(pat, path) {
			out = append(out, h)
		}
	}
	return out
}

// EditPath is the verdict on one path: the holds of other actors that cover
// it (any refuses it) and the actor's own.
type EditPath struct {
	Path   string     `json:"path"`
	Others []PathHold `json:"others"`
	Own    []PathHold `json:"own"`
}

// Unheld reports whether nobody holds the path.
func (p EditPath) Unheld() bool { return len(p.Others) == 0 && len(p.Own) == 0 }

// AgingHold is one of the actor's holds that has used more than a third of
// its TTL: a guard pass renews it, keeping its TTL.
type AgingHold struct {
	PathHold
	TTLSeconds int `json:"ttl_seconds"`
}

// Cell returns the claimed cell whose declared paths h is, and false for a
// path lock.
func (h PathHold) Cell() (CellRef, bool) { return h.cell, h.Source != "lock" }

// EditDecision is EditCheck's answer.
type EditDecision struct {
	Paths []EditPath `json:"paths"`
	// Unleased is the policy's edit_leases mode (Off, Warn or Enforce): what
	// a path nobody holds gets.
	Unleased string `json:"unleased"`
	// Aging are the actor's live holds (its path locks and the paths of its
	// claimed cells) past a third of their TTL, one per lock or cell.
	Aging []AgingHold `json:"aging"`
	// Holds are the actor's own live holds (for session start's context).
	Holds []PathHold `json:"holds"`
}

// Refused reports whether the decision refuses the edit: a path another
// actor holds, or a path nobody holds under edit_leases enforce.
func (d *EditDecision) Refused() bool {
	for _, p := range d.Paths {
		if len(p.Others) > 0 || p.Unheld() && d.Unleased == Enforce {
			return true
		}
	}
	return false
}

// Warned lists the paths nobody holds when edit_leases is warn.
func (d *EditDecision) Warned() []string {
	var out []string
	if d.Unleased != Warn {
		return nil
	}
	for _, p := range d.Paths {
		if p.Unheld() {
			out = append(out, p.Path)
		}
	}
	return out
}

// EditCheck decides whether actor may change paths (repository-relative,
// clean) at now: each path against the live holds (HoldsOn), the actor's
// own allowing it and another actor's refusing it; paths nobody holds as
// the policy's edit_leases says. It also finds the actor's holds that have
// used more than a third of their TTL (reading the records of the actor's
// own locks, whose TTL the index lacks).
func EditCheck(kv chain.KV, actor string, paths []string, now time.Time, ignoreCase bool) (*EditDecision, error) {
	t := newTxn(kv)
	s, err := loadPaths(t, now)
	if err != nil {
		return nil, err
	}
	holds := s.holds()
	d := &EditDecision{Paths: make([]EditPath, 0, len(paths)), Unleased: s.pol.editLeases(), Aging: []AgingHold{}, Holds: []PathHold{}}
	for _, p := range paths {
		v := EditPath{Path: p, Others: []PathHold{}, Own: []PathHold{}}
		for _, h := range HoldsOn(holds, p, ignoreCase) {
			if h.Actor == actor {
				v.Own = append(v.Own, h)
			} else {
				v.Others = append(v.Others, h)
			}
		}
		d.Paths = append(d.Paths, v)
	}
	seen := map[CellRef]bool{}
	for _, h := range holds {
		if h.Actor != actor {
			continue
		}
		d.Holds = append(d.Holds, h)
		ref, isCell := h.Cell()
		if isCell && seen[ref] {
			continue
		}
		seen[ref] = isCell
		exp, err := chain.ParseTime(h.ExpiresAt)
		if err != nil {
			return nil, err
		}
		ttl := h.ttl
		if !isCell { // the index has no TTL: read the actor's own lock (few)
			pl, ok, err := t.pathLock(h.Pattern)
			if err != nil {
				return nil, err
			}
			if !ok || pl.Lease == nil {
				continue
			}
			ttl = pl.Lease.TTLSeconds
		}
		if exp.Sub(now) < 2*time.Duration(ttl)*time.Second/3 {
			d.Aging = append(d.Aging, AgingHold{h, ttl})
		}
	}
	return d, nil
}
