package lease

import (
	"sync"
	"time"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
)

// Candidate is a cell that a claim could take now.
type Candidate struct {
	Wave    string `json:"wave"`
	Cell    string `json:"cell"`
	Index   int    `json:"index"`
	Expired bool   `json:"expired"` // claimed, but its lease has expired
}

// Ready returns the claimable cells of one wave at time now, in the order
// claim --next takes them: pending cells whose deps are done, in plan order,
// then claimed cells whose lease expired, in plan order. With limit > 0 it
// stops after limit cells.
func Ready(kv chain.KV, wave string, now time.Time, limit int) ([]Candidate, error) {
	t := newTxn(kv)
	out, err := t.pendingReady(wave, limit)
	if err != nil || (limit > 0 && len(out) == limit) {
		return out, err
	}
	expired, err := t.expiredHeld(wave, now, limit-len(out))
	return append(out, expired...), err
}

// pendingReady lists the pending cells of a wave whose deps are done, from the
// wave's ready bitmap: one read of the summary plus one per order chunk.
func (t *txn) pendingReady(wave string, limit int) ([]Candidate, error) {
	wv, err := t.wave(wave)
	if err != nil {
		return nil, err
	}
	rb, err := decodeBitmap(wv.Ready, wv.Size)
	if err != nil {
		return nil, err
	}
	var out []Candidate
	order := t.orderCursor(wave)
	for i := rb.next(0); i >= 0 && (limit <= 0 || len(out) < limit); i = rb.next(i + 1) {
		id, err := order.at(i)
		if err != nil {
			return nil, err
		}
		out = append(out, Candidate{Wave: wave, Cell: id, Index: i})
	}
	return out, nil
}

// expiredHeld lists the claimed cells of a wave whose lease expired at now;
// it reads every claimed cell of the wave.
func (t *txn) expiredHeld(wave string, now time.Time, limit int) ([]Candidate, error) {
	var out []Candidate
	err := t.heldCells(wave, func(i int, id string, c *Cell) (bool, error) {
		exp, err := expiredAt(c.Lease.ExpiresAt, now)
		if err != nil || !exp {
			return false, err
		}
		out = append(out, Candidate{Wave: wave, Cell: id, Index: i, Expired: true})
		return limit > 0 && len(out) == limit, nil
	})
	return out, err
}

// heldCells calls f for each claimed cell of a wave that has a lease, in plan
// order, until f says stop or fails.
func (t *txn) heldCells(wave string, f func(index int, id string, c *Cell) (stop bool, err error)) error {
	wv, err := t.wave(wave)
	if err != nil {
		return err
	}
	hb, err := decodeBitmap(wv.Held, wv.Size)
	if err != nil {
		return err
	}
	order := t.orderCursor(wave)
	for _, i := range hb.indexes() {
		id, err := order.at(i)
		if err != nil {
			return err
		}
		c, err := t.cell(wave, id)
		if err != nil {
			return err
		}
		if c.Lease == nil {
			continue
		}
		if stop, err := f(i, id, c); stop || err != nil {
			return err
		}
	}
	return nil
}

// Next returns the first claimable cell in deterministic order, or nil if
// none is claimable: the first pending cell with its deps done (waves in the
// order they were planned, cells in plan order), else the first claimed cell
// whose lease expired (same order). Fresh work first keeps the common case to
// a few reads however many leases are held; expired leases are taken when no
// fresh work is left. With wave set, only that wave is considered.
func Next(kv chain.KV, wave string, now time.Time) (*Candidate, error) {
	waves := []string{wave}
	if wave == "" {
		p, err := ReadPlan(kv)
		if err != nil {
			return nil, err
		}
		waves = p.Waves
	}
	t := newTxn(kv)
	for _, w := range waves {
		if c, err := t.pendingReady(w, 1); err != nil || len(c) > 0 {
			return first(c), err
		}
	}
	for _, w := range waves {
		if c, err := t.expiredHeld(w, now, 1); err != nil || len(c) > 0 {
			return first(c), err
		}
	}
	return nil, nil
}

// Open counts the cells that a claim --next may still get, now or later:
// pending cells (their deps may yet be done) and claimed ones (their lease may
// end), in wave, or in every wave when wave is "". Done and failed cells are
// not open: a failed cell needs a requeue first.
func Open(kv chain.KV, wave string) (int, error) {
	waves := []string{wave}
	if wave == "" {
		p, err := ReadPlan(kv)
		if err != nil {
			return 0, err
		}
		waves = p.Waves
	}
	t := newTxn(kv)
	n := 0
	for _, w := range waves {
		wv, err := t.wave(w)
		if err != nil {
			return 0, err
		}
		n += wv.Counts[Pending] + wv.Counts[Claimed]
	}
	return n, nil
}

func first(c []Candidate) *Candidate {
	if len(c) == 0 {
		return nil
	}
	return &c[0]
}

// StatusCell is what a status view shows of one cell.
type StatusCell struct {
	ID    string `json:"id"`
	State string `json:"state"`
	Epoch int64  `json:"epoch"`
	Lease *Lease `json:"lease"`
	// Ready: a claim could take the cell at the time the view asked about,
	// exactly when Ready lists it (pending with its deps done, or claimed
	// with its lease expired).
	Ready bool `json:"-"`
}

// WaveCells returns a wave's summary and every cell of it in plan order, as
// a status view shows them at time now. It reads the summary, each order
// chunk and each cell once, and decodes of a cell only the fields of a
// StatusCell (a cell's history grows with every entry about it); a cell
// that is not valid JSON is CORRUPT as when it is read whole.
//
// more are further readers of the same state as kv, for a big wave: its
// cells are then read in up to 1+len(more) contiguous parts of the plan
// order at once, each part by one reader in a goroutine of its own (a
// reader need not be safe for concurrent use), none smaller than
// parallelCells. The answer, and the error when reads fail (the first
// failing cell's in plan order), are those of one reader.
func WaveCells(kv chain.KV, wave string, now time.Time, more ...chain.KV) (*Wave, []StatusCell, error) {
	t := newTxn(kv)
	wv, err := t.wave(wave)
	if err != nil {
		return nil, nil, err
	}
	rb, err := decodeBitmap(wv.Ready, wv.Size)
	if err != nil {
		return nil, nil, err
	}
	hb, err := decodeBitmap(wv.Held, wv.Size)
	if err != nil {
		return nil, nil, err
	}
	ids, err := CellIDs(kv, wv)
	if err != nil {
		return nil, nil, err
	}
	out := make([]StatusCell, len(ids))
	readers := append([]chain.KV{kv}, more...)[:max(1, min(1+len(more), len(ids)/parallelCells))]
	part := (len(ids) + len(readers) - 1) / len(readers)
	failed := make([]error, len(readers))
	var wg sync.WaitGroup
	for k, r := range readers {
		lo, hi := k*part, min(len(ids), (k+1)*part)
		wg.Go(func() { failed[k] = statusCells(newTxn(r), wave, ids, lo, hi, rb, hb, now, out) })
	}
	wg.Wait()
	for _, err := range failed {
		if err != nil {
			return nil, nil, err
		}
	}
	return wv, out, nil
}

// parallelCells is the fewest cells WaveCells gives a reader of their own:
// below it a goroutine and a reader's tree walk cost about what they save.
const parallelCells = 2048

// statusCells reads cells lo to hi of a wave's plan order (ids) into out,
// through t.
func statusCells(t *txn, wave string, ids []string, lo, hi int, rb, hb bitmap, now time.Time, out []StatusCell) error {
	for i := lo; i < hi; i++ {
		c, id := &out[i], ids[i]
		ok, err := t.load(cellKey(wave, id), c)
		if err != nil {
			return err
		}
		if !ok {
			return errs.New(errs.CellMissing, "cell not found: %s/%s", wave, id).With("wave", wave).With("cell", id)
		}
		// As Ready decides: the ready bit (pendingReady), or a held cell
		// whose lease expired at now (expiredHeld).
		c.Ready = rb.has(i)
		if hb.has(i) && c.Lease != nil {
			expired, err := expiredAt(c.Lease.ExpiresAt, now)
			if err != nil {
				return err
			}
			c.Ready = c.Ready || expired
		}
	}
	return nil
}

// PathHold is a live lease on repository paths: a path lock, or the declared
// paths of a claimed cell, which count as held by the cell's holder.
type PathHold struct {
	Pattern   string  `json:"pattern"`
	Actor     string  `json:"actor"`
	Epoch     int64   `json:"epoch"`
	ExpiresAt string  `json:"expires_at"`
	Source    string  `json:"source"` // "cell W/C" or "lock"
	cell      CellRef // the claimed cell whose paths these are; zero for a lock
	ttl       int     // the cell lease's ttl_seconds; 0 for a lock (the index has none)
}

// PathHolds returns the live path holds at time now: the path locks of
// locks/index (one read) in pattern order, then the declared paths of
// claimed cells in plan order.
func PathHolds(kv chain.KV, now time.Time) ([]PathHold, error) {
	s, err := loadPaths(newTxn(kv), now)
	if err != nil {
		return nil, err
	}
	return s.holds(), nil
}

// Locks returns the path locks live at now, in pattern order.
func Locks(kv chain.KV, now time.Time) ([]Lock, error) {
	t := newTxn(kv)
	s, err := loadPaths(t, now)
	if err != nil {
		return nil, err
	}
	out := []Lock{}
	for _, l := range s.locks {
		pl, ok, err := t.pathLock(l.Pattern)
		if err != nil {
			return nil, err
		}
		if !ok || pl.Lease == nil || pl.Epoch != l.Epoch {
			return nil, errs.New(errs.Corrupt, "locks/index lists %s at epoch %d, which is not held", l.Pattern, l.Epoch)
		}
		out = append(out, Lock{Pattern: l.Pattern, LockLease: *pl.Lease})
	}
	return out, nil
}

// KeptLockTTL is the TTL a lock entry on patterns keeps when its writer
// names none: the ttl_seconds of the actor's locks among patterns that are
// live at now (those the entry renews), or 0 when it holds none of them.
// One entry has one ttl, so locks of different TTLs cannot all keep theirs:
// USAGE, naming two of them.
func KeptLockTTL(kv chain.KV, actor string, patterns []string, now time.Time) (int, error) {
	t := newTxn(kv)
	s, err := loadPaths(t, now)
	if err != nil {
		return 0, err
	}
	ttl, from := 0, ""
	for _, p := range patterns {
		i, held := s.lockAt(p)
		if !held || s.locks[i].Actor != actor {
			continue
		}
		pl, ok, err := t.pathLock(p)
		if err != nil {
			return 0, err
		}
		if !ok || pl.Lease == nil {
			return 0, errs.New(errs.Corrupt, "locks/index lists %s, which is not held", p)
		}
		switch {
		case ttl == 0:
			ttl, from = pl.Lease.TTLSeconds, p
		case pl.Lease.TTLSeconds != ttl:
			return 0, errs.New(errs.Usage, "your locks on %s (ttl %ds) and %s (ttl %ds) differ: give --ttl to renew them together",
				from, ttl, p, pl.Lease.TTLSeconds)
		}
	}
	return ttl, nil
}

// ReadLock returns the stored state of a pattern, or nil if it was never locked.
func ReadLock(kv chain.KV, pattern string) (*PathLock, error) {
	pl, ok, err := newTxn(kv).pathLock(pattern)
	if err != nil || !ok {
		return nil, err
	}
	return pl, nil
}

// Waits returns the waits live at now, in waiter order.
func Waits(kv chain.KV, now time.Time) ([]Wait, error) {
	t := newTxn(kv)
	s, err := loadPaths(t, now)
	if err != nil {
		return nil, err
	}
	out := []Wait{}
	for _, iw := range s.waits {
		var w Wait
		ok, err := t.load(waitKey(iw.Waiter), &w)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, errs.New(errs.Corrupt, "waits/index lists %s, which has no wait", iw.Waiter)
		}
		out = append(out, w)
	}
	return out, nil
}

// ReadWait returns an actor's wait record (live or expired but not yet
// pruned), or nil if there is none.
func ReadWait(kv chain.KV, actor string) (*Wait, error) {
	var w Wait
	ok, err := newTxn(kv).load(waitKey(actor), &w)
	if err != nil || !ok {
		return nil, err
	}
	return &w, nil
}

// WaitCycles returns the wait-for graph at now with its cycles and the
// victims a break entry at that time must name.
func WaitCycles(kv chain.KV, now time.Time) (*WaitGraph, error) {
	s, err := loadPaths(newTxn(kv), now)
	if err != nil {
		return nil, err
	}
	return s.graph()
}

// PlanLock decides a lock request of actor on normalized patterns at now, as
// the lock rule will: the leases it preempts (for LockBody.Preempts), or the
// LEASE-HELD refusal of the first conflict it may not preempt.
func PlanLock(kv chain.KV, actor string, patterns []string, now time.Time) ([]Preempted, error) {
	s, err := loadPaths(newTxn(kv), now)
	if err != nil {
		return nil, err
	}
	return s.plan(actor, patterns)
}

// Blockers returns the actors whose live holds deny pattern to actor at now
// (for WaitBody.Holders), sorted; none if actor could lock it.
func Blockers(kv chain.KV, actor, pattern string, now time.Time) ([]string, error) {
	s, err := loadPaths(newTxn(kv), now)
	if err != nil {
		return nil, err
	}
	if err := s.charge(request{actor, pattern}); err != nil {
		return nil, err
	}
	return s.blockers(actor, pattern), nil
}
