package tally

import (
	"errors"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/ledger"
)

// LockResult is the outcome of Lock and RenewLocks.
type LockResult struct {
	Appended
	*lease.LockGrant
}

// Lock locks path patterns for ttl seconds, renewing those the actor
// already holds, preempting lower-priority holders. Ttl 0 keeps the TTL of
// the actor's live locks among patterns (lease.KeptLockTTL), else is
// lease.TTLDefault. A
// conflict it may not preempt is LEASE-HELD; with wait > 0 the actor then
// records a wait on the blocked pattern and retries until granted (the grant
// clears the wait) or wait has passed: then the wait is cleared and the
// result is WAIT-TIMEOUT (waitTimeout), with the last holder's details. If a break entry
// picks the actor as a deadlock victim meanwhile, it stops waiting at once:
// LEASE-HELD with "victim": true.
func (c *Client) Lock(patterns []string, ttl int, reason string, wait time.Duration) (*LockResult, error) {
	pats, _, err := normalizeLocks(patterns, nil)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(wait)
	pause := 50 * time.Millisecond
	waiting := false // a wait of ours is recorded
	for {
		ap, err := c.appendStep(handStep{Op: OpLock, repeatedSteps: repeatedSteps{Lock: &LockStep{Patterns: pats, TTL: ttl, Reason: reason}}})
		if err == nil {
			return &LockResult{appendedOf(ap), ap.Result.Effect.(*lease.LockGrant)}, nil
		}
		held := errs.From(err)
		if held.Code != errs.LeaseHeld || wait <= 0 {
			return nil, err
		}
		if time.Now().After(deadline) {
			if err := c.clearWait(); err != nil {
				return nil, err
			}
			return nil, waitTimeout(wait, held)
		}
		requested, _ := held.Details["requested"].(string)
		if waiting, err = c.recordWait(requested, waiting); err != nil {
			if errors.Is(err, errBroken) {
				return nil, withDetails(errs.New(errs.LeaseHeld, "gave up waiting for %s: a break entry chose %s as a deadlock victim "+
					"(its waits cleared, its path locks released)", requested, c.Actor), held).With("victim", true)
			}
			return nil, err
		}
		sleep := min(pause/2+rand.N(pause), time.Until(deadline)+time.Millisecond)
		time.Sleep(max(sleep, 0))
		pause = min(2*pause, time.Second)
	}
}

// waitTimeout is the one answer of every --wait that ran out (claim and
// lock): WAIT-TIMEOUT, retryable, carrying the last refusal's details (the
// holder, epoch, ...) and its code as "refusal", with "waited".
func waitTimeout(wait time.Duration, last *errs.Error) *errs.Error {
	return withDetails(errs.New(errs.WaitTimeout, "waited %v: %s", wait, last.Message), last).
		With("refusal", last.Code).With("waited", wait.String())
}

func withDetails(e, from *errs.Error) *errs.Error {
	for k, v := range from.Details {
		e = e.With(k, v)
	}
	return e
}

// errNoWait stops an append that turns out not to be needed. It is not an
// integrity error, so in remote mode a stale tip is refetched and the
// decision made again.
var errNoWait = errs.New(errs.Usage, "nothing to append")

// errBroken reports that the actor's wait vanished while it was waiting:
// a break entry chose it as a deadlock victim.
var errBroken = errs.New(errs.LeaseHeld, "wait broken")

// recordWait records (or refreshes, past half its life or when its holders
// changed) the actor's wait on pattern, and reports whether the actor has a
// wait now. If nothing blocks the pattern any more it appends nothing: the
// next attempt will lock. With had (a wait was recorded before) and no wait
// left, the wait was broken: errBroken.
func (c *Client) recordWait(pattern string, had bool) (bool, error) {
	if pattern == "" {
		return had, nil
	}
	have := false
	_, err := c.append(func(s *ledger.Snapshot, now time.Time) (*ledger.Draft, error) {
		w, err := lease.ReadWait(s, c.Actor)
		if err != nil {
			return nil, err
		}
		if had && w == nil {
			return nil, errBroken
		}
		holders, err := lease.Blockers(s, c.Actor, pattern, now)
		if err != nil {
			return nil, err
		}
		have = w != nil
		if len(holders) == 0 {
			return nil, errNoWait
		}
		if w != nil && w.Pattern == pattern && slices.Equal(w.Holders, holders) {
			if exp, err := chain.ParseTime(w.ExpiresAt); err == nil && exp.Sub(now) > lease.WaitTTL/2 {
				return nil, errNoWait
			}
		}
		have = true
		return &ledger.Draft{Kind: chain.KindWait, Body: lease.WaitBody{Pattern: pattern, Holders: holders}}, nil
	})
	if errors.Is(err, errNoWait) {
		return have, nil
	}
	return have && err == nil, err
}

// clearWait ends the actor's wait, if it still has one.
func (c *Client) clearWait() error {
	_, err := c.append(func(s *ledger.Snapshot, now time.Time) (*ledger.Draft, error) {
		if w, err := lease.ReadWait(s, c.Actor); err != nil || w == nil {
			if err == nil {
				err = errNoWait
			}
			return nil, err
		}
		return &ledger.Draft{Kind: chain.KindWait, Body: lease.WaitBody{Clear: true}}, nil
	})
	if errors.Is(err, errNoWait) {
		return nil
	}
	return err
}

// RenewLocks extends the actor's live locks, each at its epoch: one epoch
// for all patterns, or one per pattern in the order given. A lock that was
// preempted or broken has moved to another epoch: EPOCH-MISMATCH.
func (c *Client) RenewLocks(patterns []string, epochs []int64, ttl int, reason string) (*LockResult, error) {
	if len(epochs) == 0 {
		return nil, errs.New(errs.Usage, "renewing locks needs their epochs")
	}
	pats, eps, err := normalizeLocks(patterns, epochs)
	if err != nil {
		return nil, err
	}
	ap, err := c.appendStep(handStep{Op: OpLock, repeatedSteps: repeatedSteps{Lock: &LockStep{Patterns: pats, TTL: ttl, Reason: reason, Epochs: eps}}})
	if err != nil {
		return nil, err
	}
	return &LockResult{appendedOf(ap), ap.Result.Effect.(*lease.LockGrant)}, nil
}

// lockTTL is the ttl of actor's lock entry on pats: ttl if given, else what
// the actor's live locks among them keep, else lease.TTLDefault. It is
// decided on each attempt's snapshot, since the locks may have changed
// between.
func lockTTL(s *ledger.Snapshot, actor string, pats []string, ttl int, now time.Time) (int, error) {
	if ttl != 0 {
		return ttl, nil
	}
	kept, err := lease.KeptLockTTL(s, actor, pats, now)
	if err != nil || kept != 0 {
		return kept, err
	}
	return lease.TTLDefault, nil
}

// Unlock releases the actor's locks, each at its epoch (one for all patterns,
// or one per pattern in the order given).
func (c *Client) Unlock(patterns []string, epochs []int64) (*Appended, error) {
	pats, eps, err := normalizeLocks(patterns, epochs)
	if err != nil {
		return nil, err
	}
	return c.simpleStep(handStep{Op: OpUnlock, repeatedSteps: repeatedSteps{Unlock: &lease.UnlockBody{Patterns: pats, Epochs: eps}}})
}

// normalizeLocks normalizes specs (USAGE for "..", absolute or empty ones),
// pairs them with epochs (none, one for all, or one each) and sorts the
// pairs by pattern. A pattern given twice is USAGE.
func normalizeLocks(specs []string, epochs []int64) ([]string, []int64, error) {
	if err := lease.CheckLockCount(len(specs)); err != nil {
		return nil, nil, err
	}
	if epochs != nil && len(epochs) != 1 && len(epochs) != len(specs) {
		return nil, nil, errs.New(errs.Usage, "give one epoch, or one per pathspec (%d)", len(specs))
	}
	type pair struct {
		p string
		e int64
	}
	ps := make([]pair, len(specs))
	for i, s := range specs {
		n, err := lease.NormalizePattern(s)
		if err != nil {
			return nil, nil, err
		}
		ps[i].p = n
		if epochs != nil {
			ps[i].e = epochs[min(i, len(epochs)-1)]
		}
	}
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].p < ps[j].p })
	pats := make([]string, len(ps))
	var eps []int64
	for i, x := range ps {
		if i > 0 && ps[i-1].p == x.p {
			return nil, nil, errs.New(errs.Usage, "pathspec %s given twice", x.p)
		}
		pats[i] = x.p
		if epochs != nil {
			eps = append(eps, x.e)
		}
	}
	return pats, eps, nil
}

// LocksView is the path-lease state at one time.
type LocksView struct {
	Now   string           `json:"now"`
	Locks []lease.Lock     `json:"locks"` // live path locks, by pattern
	Cells []lease.PathHold `json:"cells"` // claimed cells' declared paths, which count as held
	Waits []lease.Wait     `json:"waits"` // live waits, by waiter
}

// Locks lists the live path locks, the paths held through claimed cells and
// the live waits.
func (c *Client) Locks() (*LocksView, error) {
	s, err := c.head()
	if err != nil {
		return nil, err
	}
	now := c.L.Now()
	v := &LocksView{Now: chain.FormatTime(now), Cells: []lease.PathHold{}}
	if v.Locks, err = lease.Locks(s, now); err != nil {
		return nil, err
	}
	if v.Waits, err = lease.Waits(s, now); err != nil {
		return nil, err
	}
	holds, err := lease.PathHolds(s, now)
	if err != nil {
		return nil, err
	}
	for _, h := range holds {
		if h.Source != "lock" {
			v.Cells = append(v.Cells, h)
		}
	}
	return v, nil
}

// DeadlockResult is the wait-for graph, its cycles and victims, and the
// break entry when one was appended.
type DeadlockResult struct {
	Now string `json:"now"`
	*lease.WaitGraph
	Break *BreakResult `json:"break"` // null unless a break entry was appended
}

// BreakResult is an appended break entry and the locks it released.
type BreakResult struct {
	Appended
	Released []lease.Preempted `json:"released"`
}

// Deadlocks finds the cycles of the wait-for graph. With brk and a cycle
// present it appends one break entry preempting the victims (the graph
// reported is then the one the entry was decided on).
func (c *Client) Deadlocks(brk bool) (*DeadlockResult, error) {
	if !brk {
		s, err := c.head()
		if err != nil {
			return nil, err
		}
		now := c.L.Now()
		g, err := lease.WaitCycles(s, now)
		if err != nil {
			return nil, err
		}
		return &DeadlockResult{Now: chain.FormatTime(now), WaitGraph: g}, nil
	}
	res := &DeadlockResult{}
	ap, err := c.append(func(s *ledger.Snapshot, now time.Time) (*ledger.Draft, error) {
		g, err := lease.WaitCycles(s, now)
		if err != nil {
			return nil, err
		}
		res.Now, res.WaitGraph = chain.FormatTime(now), g
		if len(g.Cycles) == 0 {
			return nil, errNoWait
		}
		return &ledger.Draft{Kind: chain.KindBreak, Body: lease.BreakBody{Cycles: g.Cycles, Victims: g.Victims}}, nil
	})
	if errors.Is(err, errNoWait) {
		return res, nil
	}
	if err != nil {
		return nil, err
	}
	res.Break = &BreakResult{appendedOf(ap), ap.Result.Effect.(*lease.BreakResult).Released}
	return res, nil
}
