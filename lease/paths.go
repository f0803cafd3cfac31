package lease

// Path leases: the "lock", "unlock", "wait" and "break" entries.
//
// A path lock is a lease on a normalized pattern (package pathspec). Two holds
// conflict when some path matches both patterns (pathspec.Overlap, exact). The
// live holds are the path locks listed in the index "locks/index" that have
// not expired, and the declared paths of claimed cells whose lease has not
// expired. A request conflicts only with other actors' holds. Against a lock
// held by a lower-priority actor (Policy.Priority) it preempts; against any
// other conflicting hold (an equal or higher priority lock, or a cell's paths,
// which locks never preempt) it is refused with LEASE-HELD.
//
// Deadlocks: a denied actor may record a wait on the pattern it was denied.
// The wait-for graph has an edge from each live waiter to each actor blocking
// its pattern now (recomputed from the state, so a stale wait adds no edge).
// A break entry clears the wait and releases every lock of one victim per
// strongly connected component, recomputed until no cycle is left.

import (
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/zeebo/blake3"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/pathspec"
)

// Limits of the path-lease rules. They bound what one entry reads and writes.
const (
	MaxLockPatterns = 32               // patterns per lock or unlock entry
	MaxLiveLocks    = 1024             // entries of locks/index
	MaxWaits        = 1024             // entries of waits/index
	WaitTTL         = 10 * time.Minute // a wait expires this long after it was recorded
	lockHistoryLen  = 16               // seqs kept in a lock's history
	locksIndexKey   = "locks/index"
	waitsIndexKey   = "waits/index"
)

// shardKey is "<dir>/<xx>/<h>": h the BLAKE3-256 of name in hex, xx its first two digits.
func shardKey(dir, name string) string {
	sum := blake3.Sum256([]byte(name))
	h := hex.EncodeToString(sum[:])
	return dir + "/" + h[:2] + "/" + h
}

func lockKey(pattern string) string { return shardKey("locks", pattern) }
func waitKey(actor string) string   { return shardKey("waits", actor) }

// LockLease is one actor's hold of a pattern at one epoch. Renewing moves
// heartbeat_at and expires_at; acquired_at is fixed for the epoch.
type LockLease struct {
	Actor       string `json:"actor"`
	Epoch       int64  `json:"epoch"`
	AcquiredAt  string `json:"acquired_at"`
	HeartbeatAt string `json:"heartbeat_at"`
	ExpiresAt   string `json:"expires_at"`
	TTLSeconds  int    `json:"ttl_seconds"`
	Reason      string `json:"reason,omitempty"`
}

// PathLock is the stored state of one pattern ("locks/<xx>/<h>"). It outlives
// its leases so that epochs are never reused: Epoch is the last epoch
// granted, or the epoch a preemption or break bumped it to.
type PathLock struct {
	Pattern string     `json:"pattern"`
	Epoch   int64      `json:"epoch"`
	Lease   *LockLease `json:"lease"`   // null once unlocked, preempted or broken
	History []uint64   `json:"history"` // seqs of the last 16 entries that changed it
}

// Lock is a held path lock, as views and lock results report it.
type Lock struct {
	Pattern string `json:"pattern"`
	LockLease
}

// indexedLock is an entry of locks/index: enough to check conflicts and to
// enforce at push without reading the lock itself.
type indexedLock struct {
	Pattern   string `json:"pattern"`
	Actor     string `json:"actor"`
	Epoch     int64  `json:"epoch"`
	ExpiresAt string `json:"expires_at"`
}

type locksIndex struct {
	Locks []indexedLock `json:"locks"` // sorted by pattern, one per pattern
}

// Wait is a recorded wait ("waits/<xx>/<h>", h hashing the waiter).
type Wait struct {
	Waiter     string   `json:"waiter"`
	Pattern    string   `json:"pattern"`
	Holders    []string `json:"holders"` // who blocked the pattern when the wait was recorded
	RecordedAt string   `json:"recorded_at"`
	ExpiresAt  string   `json:"expires_at"`
	Seq        uint64   `json:"seq"`
}

type indexedWait struct {
	Waiter    string `json:"waiter"`
	Pattern   string `json:"pattern"`
	ExpiresAt string `json:"expires_at"`
}

type waitsIndex struct {
	Waits []indexedWait `json:"waits"` // sorted by waiter, one per waiter
}

// Preempted names a lock lease taken away: by a higher-priority lock, or by
// a break. Epoch is the lease's epoch before it was taken.
type Preempted struct {
	Pattern string `json:"pattern"`
	Actor   string `json:"actor"`
	Epoch   int64  `json:"epoch"`
}

// LockBody is the body of a "lock" entry. Patterns are normalized and
// strictly increasing. Without Epochs it acquires each pattern, or renews it
// if the actor holds it live, and must name in Preempts (sorted by pattern)
// exactly the lower-priority leases it takes. With Epochs (one per pattern)
// it only renews: each pattern must be the actor's live lease at that epoch.
type LockBody struct {
	Patterns []string    `json:"patterns"`
	TTL      int         `json:"ttl"`
	Reason   string      `json:"reason,omitempty"`
	Epochs   []int64     `json:"epochs,omitempty"`
	Preempts []Preempted `json:"preempts,omitempty"`
}

// UnlockBody is the body of an "unlock" entry: Epochs[i] is the epoch of
// the actor's lease on Patterns[i].
type UnlockBody struct {
	Patterns []string `json:"patterns"`
	Epochs   []int64  `json:"epochs"`
}

// WaitBody is the body of a "wait" entry: the actor waits for Pattern, which
// Holders (sorted) block now; or, with Clear, the actor's wait ends.
type WaitBody struct {
	Pattern string   `json:"pattern,omitempty"`
	Holders []string `json:"holders,omitempty"`
	Clear   bool     `json:"clear,omitempty"`
}

// BreakBody is the body of a "break" entry: the strongly connected
// components of the wait-for graph and the victims, exactly as WaitCycles
// computes them at the entry's time.
type BreakBody struct {
	Cycles  [][]string `json:"cycles"`
	Victims []string   `json:"victims"`
}

// LockGrant is the effect of a lock entry.
type LockGrant struct {
	Locks     []Lock      `json:"locks"`
	Renewed   []string    `json:"renewed"`   // patterns whose live lease was extended
	Preempted []Preempted `json:"preempted"` // leases taken from lower-priority holders
}

// BreakResult is the effect of a break entry.
type BreakResult struct {
	Cycles   [][]string  `json:"cycles"`
	Victims  []string    `json:"victims"`
	Released []Preempted `json:"released"`
}

// WaitEdge is an edge of the wait-for graph: Waiter waits for Pattern, which
// Holder blocks.
type WaitEdge struct {
	Waiter  string `json:"waiter"`
	Holder  string `json:"holder"`
	Pattern string `json:"pattern"`
}

// WaitGraph is the wait-for graph at one time, its cycles and the victims a
// break would take.
type WaitGraph struct {
	Edges   []WaitEdge `json:"edges"`   // sorted by waiter, then holder
	Cycles  [][]string `json:"cycles"`  // strongly connected components of 2+ actors, each sorted, ordered by first member
	Victims []string   `json:"victims"` // sorted
}

// ---------------------------------------------------------------- state

// paths is the path-lease state as one entry (or view) sees it at time now.
type paths struct {
	t       *txn
	pol     *Policy
	locks   []indexedLock        // live at now, sorted by pattern
	cells   []PathHold           // live claimed cells' declared paths
	waits   []indexedWait        // live at now, sorted by waiter
	all     []PathHold           // locks and cells, built by holds
	cands   map[request][]int    // candidates of the requests charged, into all
	comp    []*pathspec.Compiled // of all, each compiled when first tested
	spent   int64                // check cost charged so far (see charge)
	dirtyL  bool                 // locks differs from the stored index
	dirtyW  bool
	deleted []string // wait records of expired waits, to delete with the index
}

func expiredAt(stamp string, now time.Time) (bool, error) {
	t, err := chain.ParseTime(stamp)
	if err != nil {
		return false, errs.Wrap(errs.Corrupt, err, "stored timestamp")
	}
	return now.After(t), nil
}

// loadPaths reads the indexes and the cells' path holds, dropping what has
// expired at now (the stored indexes are pruned when next written).
func loadPaths(t *txn, now time.Time) (*paths, error) {
	pol, err := ReadPolicy(t)
	if err != nil {
		return nil, err
	}
	s := &paths{t: t, pol: pol}
	var li locksIndex
	if _, err := t.loadWith(locksIndexKey, &li, func(b []byte, v any) error { return decodeLocksIndex(b, v.(*locksIndex)) }); err != nil {
		return nil, err
	}
	lastStamp, lastExp := "", false // the locks one entry took share their expiry: parse it once
	for _, l := range li.Locks {
		exp := lastExp
		if l.ExpiresAt != lastStamp || lastStamp == "" {
			if exp, err = expiredAt(l.ExpiresAt, now); err != nil {
				return nil, err
			}
			lastStamp, lastExp = l.ExpiresAt, exp
		}
		if exp {
			s.dirtyL = true
		} else {
			s.locks = append(s.locks, l)
		}
	}
	var wi waitsIndex
	if _, err := t.load(waitsIndexKey, &wi); err != nil {
		return nil, err
	}
	for _, w := range wi.Waits {
		exp, err := expiredAt(w.ExpiresAt, now)
		if err != nil {
			return nil, err
		}
		if exp {
			s.dirtyW = true
			s.deleted = append(s.deleted, waitKey(w.Waiter))
		} else {
			s.waits = append(s.waits, w)
		}
	}
	if s.cells, err = cellHolds(t, now); err != nil {
		return nil, err
	}
	return s, nil
}

// cellHolds returns the declared paths of the claimed cells whose lease is
// live at now. It reads the plan, each wave summary and each claimed cell.
func cellHolds(t *txn, now time.Time) ([]PathHold, error) {
	var p Plan
	if _, err := t.load(planKey, &p); err != nil {
		return nil, err
	}
	var out []PathHold
	for _, w := range p.Waves {
		err := t.heldCells(w, func(_ int, id string, c *Cell) (bool, error) {
			if len(c.Paths) == 0 {
				return false, nil
			}
			if exp, err := expiredAt(c.Lease.ExpiresAt, now); err != nil || exp {
				return false, err
			}
			src := "cell " + w + "/" + id
			for _, pat := range c.Paths {
				out = append(out, PathHold{Pattern: pat, Actor: c.Lease.Actor, Epoch: c.Lease.Epoch,
					ExpiresAt: c.Lease.ExpiresAt, Source: src, cell: CellRef{Wave: w, Cell: id}, ttl: c.Lease.TTLSeconds})
			}
			return false, nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// conflict is another actor's live hold overlapping a requested pattern.
type conflict struct {
	requested string
	hold      PathHold
	witness   string // a path both match
	preempt   bool   // a lock of a lower-priority actor
}

// keyTrie is a set of pattern keys (pathspec.Key) as a tree of segments:
// order lists the patterns by key, and each node's patterns are contiguous
// in it. Walking a key down the trie visits, segment by segment, the nodes of
// the keys that are its prefixes; the node where the walk ends holds the keys
// it is a prefix of below it. One map for all nodes costs far less to build
// than one per node.
type keyTrie struct {
	order []int     // pattern indexes sorted by key
	nodes []keyNode // nodes[0] is the root (the empty key)
	kids  map[keyEdge]int
}

// keyNode is one key: order[lo:end] are the patterns with exactly this key,
// order[lo:hi] those with this key or one below it. Sorting by key makes
// both ranges contiguous, the exact key first.
type keyNode struct{ lo, end, hi int }

// keyEdge names a child: the parent's index in nodes and the segment.
type keyEdge struct {
	parent int
	seg    string
}

func newKeyTrie(keys []string) *keyTrie {
	x := &keyTrie{order: make([]int, len(keys)), nodes: []keyNode{{}}, kids: map[keyEdge]int{}}
	for i := range keys {
		x.order[i] = i
	}
	sort.SliceStable(x.order, func(a, b int) bool { return keys[x.order[a]] < keys[x.order[b]] })
	for k, i := range x.order {
		n := 0
		visit := func(n int) {
			if x.nodes[n].hi == 0 { // first visit: no pattern has exactly this key yet
				x.nodes[n].lo, x.nodes[n].end = k, k
			}
			x.nodes[n].hi = k + 1
		}
		visit(n)
		for seg := range keySegments(keys[i]) {
			next, ok := x.kids[keyEdge{n, seg}]
			if !ok {
				next = len(x.nodes)
				x.nodes = append(x.nodes, keyNode{})
				x.kids[keyEdge{n, seg}] = next
			}
			n = next
			visit(n)
		}
		x.nodes[n].end = k + 1
	}
	return x
}

// related calls f with each pattern of the trie whose key is prefix-related
// to key: a prefix of it (in order of length) or extending it. It stops, and
// returns false, as soon as f returns false.
func (x *keyTrie) related(key string, f func(i int) bool) bool {
	each := func(from, to int) bool {
		for _, i := range x.order[from:to] {
			if !f(i) {
				return false
			}
		}
		return true
	}
	n := 0
	if !each(x.nodes[0].lo, x.nodes[0].end) {
		return false
	}
	for seg := range keySegments(key) {
		var ok bool
		if n, ok = x.kids[keyEdge{n, seg}]; !ok {
			return true
		}
		if !each(x.nodes[n].lo, x.nodes[n].end) {
			return false
		}
	}
	return each(x.nodes[n].end, x.nodes[n].hi)
}

// keySegments yields the segments of a key ("a/b/" yields "a", "b").
func keySegments(key string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for key != "" {
			i := strings.IndexByte(key, '/')
			if !yield(key[:i]) {
				return
			}
			key = key[i+1:]
		}
	}
}

// holds returns the live holds: locks in pattern order, then cells' paths in
// plan order. setLock and dropLock drop it.
func (s *paths) holds() []PathHold {
	if s.all == nil {
		s.all = make([]PathHold, 0, len(s.locks)+len(s.cells))
		for _, l := range s.locks {
			s.all = append(s.all, PathHold{Pattern: l.Pattern, Actor: l.Actor, Epoch: l.Epoch, ExpiresAt: l.ExpiresAt, Source: "lock"})
		}
		s.all = append(s.all, s.cells...)
	}
	return s.all
}

// request is one pattern an actor asks for.
type request struct{ actor, pattern string }

// candidates finds, for each request, the holds of other actors whose key is
// prefix-related to the request's: the only holds it can overlap (see
// pathspec.Key). It builds a trie of the requests' keys (few) and walks each
// hold's key down it (many, most leaving at the first segment), so the cost
// is one short walk per hold plus one step per candidate found. It records
// the candidates (indexes into holds, ascending) for conflicts and returns
// their total pathspec.Cost, or, as soon as that passes budget, the total so
// far: an entry over budget is refused without listing all its pairs.
func (s *paths) candidates(reqs []request, budget int64) int64 {
	if s.cands == nil {
		s.cands = map[request][]int{}
	}
	keys := make([]string, len(reqs))
	for i, r := range reqs {
		keys[i] = pathspec.Key(r.pattern)
	}
	trie := newKeyTrie(keys)
	found := make([][]int, len(reqs))
	var cost int64
	for i, h := range s.holds() {
		within := trie.related(pathspec.Key(h.Pattern), func(r int) bool {
			if req := reqs[r]; h.Actor != req.actor {
				found[r] = append(found[r], i)
				cost += pathspec.Cost(req.pattern, h.Pattern)
			}
			return cost <= budget
		})
		if !within {
			return cost
		}
	}
	for i, r := range reqs {
		s.cands[r] = found[i] // present, if empty: charged
	}
	return cost
}

// charge refuses, with LIMIT-EXCEEDED, a check of reqs whose candidate pairs
// would cost more than MaxCheckCost together with what the entry already
// checked. Callers charge every request before testing any, so an entry over
// budget is refused before the expensive work.
func (s *paths) charge(reqs ...request) error {
	s.spent += s.candidates(reqs, MaxCheckCost-s.spent)
	if s.spent > MaxCheckCost {
		return limitErr(limitCheckCost, s.spent, MaxCheckCost,
			"checking %d pattern(s) against the %d live path holds costs too much", len(reqs), len(s.holds()))
	}
	return nil
}

// conflicts returns the holds of actors other than actor that overlap
// pattern: locks in pattern order, then cells' paths in plan order. It tests
// the candidates charge found; a request not charged is charged now.
func (s *paths) conflicts(actor, pattern string) []conflict {
	req := request{actor, pattern}
	if _, ok := s.cands[req]; !ok {
		s.spent += s.candidates([]request{req}, math.MaxInt64)
	}
	var out []conflict
	prio := s.pol.Priority(actor)
	holds := s.holds()
	if s.comp == nil {
		s.comp = make([]*pathspec.Compiled, len(holds))
	}
	p := pathspec.Compile(pattern)
	for _, i := range s.cands[req] {
		h := holds[i]
		if s.comp[i] == nil {
			s.comp[i] = pathspec.Compile(h.Pattern)
		}
		if w, ok := p.Overlap(s.comp[i]); ok {
			isLock := i < len(s.locks)
			out = append(out, conflict{pattern, h, w, isLock && prio > s.pol.Priority(h.Actor)})
		}
	}
	return out
}

// checkHolds refuses, with LIMIT-EXCEEDED, an entry that would leave more
// than MaxLiveHolds live holds: added new ones, dropped of the current ones
// go.
func (s *paths) checkHolds(added, dropped int) error {
	if n := len(s.locks) + len(s.cells) - dropped + added; n > MaxLiveHolds {
		return limitErr(limitLiveHolds, int64(n), MaxLiveHolds, "%d live path holds after this entry", n)
	}
	return nil
}

// blockers returns the sorted actors whose holds deny pattern to actor. The
// caller has charged it.
func (s *paths) blockers(actor, pattern string) []string {
	var out []string
	for _, c := range s.conflicts(actor, pattern) {
		if !c.preempt && !slices.Contains(out, c.hold.Actor) {
			out = append(out, c.hold.Actor)
		}
	}
	sort.Strings(out)
	return out
}

// plan decides a lock request: the leases it preempts (sorted by pattern),
// or LEASE-HELD for the first conflict it may not preempt.
func (s *paths) plan(actor string, patterns []string) ([]Preempted, error) {
	reqs := make([]request, len(patterns))
	for i, p := range patterns {
		reqs[i] = request{actor, p}
	}
	if err := s.charge(reqs...); err != nil {
		return nil, err
	}
	var out []Preempted
	for _, p := range patterns {
		for _, c := range s.conflicts(actor, p) {
			if !c.preempt {
				return nil, heldErr(c)
			}
			pr := Preempted{Pattern: c.hold.Pattern, Actor: c.hold.Actor, Epoch: c.hold.Epoch}
			if !slices.Contains(out, pr) {
				out = append(out, pr)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pattern < out[j].Pattern })
	return out, nil
}

func heldErr(c conflict) *errs.Error {
	h := c.hold
	return errs.New(errs.LeaseHeld, "%s overlaps %s held by %s (%s, epoch %d) until %s: both match %s",
		c.requested, h.Pattern, h.Actor, h.Source, h.Epoch, h.ExpiresAt, c.witness).
		With("holder", h.Actor).With("epoch", h.Epoch).With("expires_at", h.ExpiresAt).
		With("pattern", h.Pattern).With("requested", c.requested).With("witness", c.witness).With("source", h.Source)
}

func (s *paths) lockAt(pattern string) (int, bool) {
	i := sort.Search(len(s.locks), func(i int) bool { return s.locks[i].Pattern >= pattern })
	return i, i < len(s.locks) && s.locks[i].Pattern == pattern
}

func (s *paths) setLock(l indexedLock) {
	i, ok := s.lockAt(l.Pattern)
	if ok {
		s.locks[i] = l
	} else {
		s.locks = slices.Insert(s.locks, i, l)
	}
	s.dirtyL, s.all, s.cands, s.comp = true, nil, nil, nil
}

func (s *paths) dropLock(pattern string) {
	if i, ok := s.lockAt(pattern); ok {
		s.locks = slices.Delete(s.locks, i, i+1)
		s.dirtyL, s.all, s.cands, s.comp = true, nil, nil, nil
	}
}

func (s *paths) waitAt(waiter string) (int, bool) {
	i := sort.Search(len(s.waits), func(i int) bool { return s.waits[i].Waiter >= waiter })
	return i, i < len(s.waits) && s.waits[i].Waiter == waiter
}

// clearWait removes waiter's wait record, live or not, and reports whether
// there was one.
func (s *paths) clearWait(waiter string) (bool, error) {
	_, ok, err := s.t.get(waitKey(waiter))
	if err != nil || !ok {
		return false, err
	}
	s.t.del(waitKey(waiter))
	if i, ok := s.waitAt(waiter); ok {
		s.waits = slices.Delete(s.waits, i, i+1)
	}
	s.dirtyW = true
	return true, nil
}

// flush writes the indexes that changed (pruned of what expired; deleted
// when empty) and deletes the records of expired waits.
func (s *paths) flush() error {
	if s.dirtyL {
		if len(s.locks) > MaxLiveLocks {
			return errs.New(errs.Busy, "more than %d live path locks", MaxLiveLocks)
		}
		if len(s.locks) == 0 {
			s.t.del(locksIndexKey)
		} else if err := s.t.put(locksIndexKey, locksIndex{s.locks}); err != nil {
			return err
		}
	}
	if s.dirtyW {
		if len(s.waits) > MaxWaits {
			return errs.New(errs.Busy, "more than %d live waits", MaxWaits)
		}
		for _, k := range s.deleted {
			s.t.del(k)
		}
		if len(s.waits) == 0 {
			s.t.del(waitsIndexKey)
		} else if err := s.t.put(waitsIndexKey, waitsIndex{s.waits}); err != nil {
			return err
		}
	}
	return nil
}

func (t *txn) pathLock(pattern string) (*PathLock, bool, error) {
	pl := &PathLock{Pattern: pattern, History: []uint64{}}
	ok, err := t.load(lockKey(pattern), pl)
	return pl, ok, err
}

func (r *rule) putLock(pl *PathLock) error {
	pl.History = append(pl.History, r.e.Seq)
	if n := len(pl.History); n > lockHistoryLen {
		pl.History = pl.History[n-lockHistoryLen:]
	}
	return r.t.put(lockKey(pl.Pattern), pl)
}

// freeLock ends a held lease; with bump the epoch moves on (preemption and
// break), so the lost holder's epoch is stale everywhere.
func (r *rule) freeLock(s *paths, pl *PathLock, bump bool) error {
	if bump {
		pl.Epoch++
	}
	pl.Lease = nil
	s.dropLock(pl.Pattern)
	return r.putLock(pl)
}

// checkPatterns checks that patterns are 1..MaxLockPatterns normalized
// patterns in strictly increasing order.
func checkPatterns(patterns []string) error {
	if err := CheckLockCount(len(patterns)); err != nil {
		return err
	}
	for i, p := range patterns {
		if err := checkPattern(p); err != nil {
			return err
		}
		if i > 0 && patterns[i-1] >= p {
			return errs.New(errs.Usage, "patterns must be sorted and distinct")
		}
	}
	return nil
}

func checkPattern(p string) error {
	if err := checkPatternLen(p); err != nil {
		return err
	}
	if n, err := pathspec.Normalize(p); err != nil || n != p {
		return errs.New(errs.Usage, "pattern %q is not a normalized pathspec", p)
	}
	return nil
}

// ---------------------------------------------------------------- rules

func (r *rule) lock() (string, any, error) {
	var b LockBody
	if err := r.body(&b); err != nil {
		return "", nil, err
	}
	if err := checkPatterns(b.Patterns); err != nil {
		return "", nil, err
	}
	if err := checkTTL(b.TTL); err != nil {
		return "", nil, err
	}
	if len(b.Reason) > maxTextLen {
		return "", nil, errs.New(errs.Usage, "reason longer than %d bytes", maxTextLen)
	}
	if b.Epochs != nil && (len(b.Epochs) != len(b.Patterns) || len(b.Preempts) > 0) {
		return "", nil, errs.New(errs.Usage, "a renewing lock gives one epoch per pattern and preempts nothing")
	}
	s, err := loadPaths(r.t, r.now)
	if err != nil {
		return "", nil, err
	}
	added := 0
	for _, p := range b.Patterns {
		if _, held := s.lockAt(p); !held {
			added++
		}
	}
	if err := s.checkHolds(added, 0); err != nil {
		return "", nil, err
	}
	g := &LockGrant{Locks: []Lock{}, Renewed: []string{}, Preempted: []Preempted{}}
	if b.Epochs == nil {
		pre, err := s.plan(r.e.Actor, b.Patterns)
		if err != nil {
			return "", nil, err
		}
		g.Preempted = append(g.Preempted, pre...)
		if !slices.Equal(g.Preempted, b.Preempts) {
			return "", nil, errs.New(errs.Usage, "lock entry must name exactly the leases it preempts: %v", g.Preempted).
				With("preempts", g.Preempted)
		}
		for _, pr := range g.Preempted {
			if slices.Contains(b.Patterns, pr.Pattern) {
				continue // the new grant below moves its epoch on
			}
			pl, _, err := r.t.pathLock(pr.Pattern)
			if err != nil {
				return "", nil, err
			}
			if err := r.freeLock(s, pl, true); err != nil {
				return "", nil, err
			}
		}
	}
	ttl := time.Duration(b.TTL) * time.Second
	for i, p := range b.Patterns {
		pl, ok, err := r.t.pathLock(p)
		if err != nil {
			return "", nil, err
		}
		_, mine := s.lockAt(p)
		mine = mine && pl.Lease != nil && pl.Lease.Actor == r.e.Actor
		if b.Epochs != nil {
			if err := r.renewable(pl, ok, b.Epochs[i]); err != nil {
				return "", nil, err
			}
			mine = true
		}
		if mine {
			l := *pl.Lease
			l.HeartbeatAt, l.ExpiresAt, l.TTLSeconds = r.ts(0), r.ts(ttl), b.TTL
			if b.Reason != "" {
				l.Reason = b.Reason
			}
			pl.Lease = &l
			g.Renewed = append(g.Renewed, p)
		} else {
			pl.Epoch++
			pl.Lease = &LockLease{Actor: r.e.Actor, Epoch: pl.Epoch, AcquiredAt: r.ts(0), HeartbeatAt: r.ts(0),
				ExpiresAt: r.ts(ttl), TTLSeconds: b.TTL, Reason: b.Reason}
		}
		if err := r.putLock(pl); err != nil {
			return "", nil, err
		}
		s.setLock(indexedLock{Pattern: p, Actor: r.e.Actor, Epoch: pl.Epoch, ExpiresAt: pl.Lease.ExpiresAt})
		g.Locks = append(g.Locks, Lock{Pattern: p, LockLease: *pl.Lease})
	}
	if _, err := s.clearWait(r.e.Actor); err != nil {
		return "", nil, err
	}
	if err := s.flush(); err != nil {
		return "", nil, err
	}
	return lockSummary(g), g, nil
}

// renewable checks a renewal of pl at epoch by the entry's actor: the epoch
// first (a preempted holder learns its token is stale), then the lease.
func (r *rule) renewable(pl *PathLock, ok bool, epoch int64) error {
	if err := r.heldBy(pl, ok, epoch); err != nil {
		return err
	}
	if exp, err := r.after(pl.Lease.ExpiresAt); err != nil || exp {
		if err != nil {
			return err
		}
		return errs.New(errs.LeaseExpired, "lock on %s expired at %s", pl.Pattern, pl.Lease.ExpiresAt).
			With("pattern", pl.Pattern).With("expires_at", pl.Lease.ExpiresAt)
	}
	return nil
}

// heldBy checks that the entry's actor holds pl at epoch (expired or not).
func (r *rule) heldBy(pl *PathLock, ok bool, epoch int64) error {
	switch {
	case !ok:
		return errs.New(errs.LeaseMissing, "no lock on %s", pl.Pattern).With("pattern", pl.Pattern)
	case pl.Epoch != epoch:
		e := errs.New(errs.EpochMismatch, "lock on %s is at epoch %d, not %d", pl.Pattern, pl.Epoch, epoch).
			With("pattern", pl.Pattern).With("epoch", pl.Epoch)
		if pl.Lease != nil {
			e = e.With("holder", pl.Lease.Actor)
		}
		return e
	case pl.Lease == nil:
		return errs.New(errs.LeaseMissing, "lock on %s (epoch %d) is not held", pl.Pattern, pl.Epoch).
			With("pattern", pl.Pattern).With("epoch", pl.Epoch)
	case pl.Lease.Actor != r.e.Actor:
		return errs.New(errs.ActorMismatch, "lock on %s held by %s, not %s", pl.Pattern, pl.Lease.Actor, r.e.Actor).
			With("pattern", pl.Pattern).With("holder", pl.Lease.Actor).With("epoch", pl.Epoch)
	}
	return nil
}

func lockSummary(g *LockGrant) string {
	var parts []string
	for i, l := range g.Locks {
		if i == 3 {
			parts = append(parts, fmt.Sprintf("+%d more", len(g.Locks)-3))
			break
		}
		s := fmt.Sprintf("%s epoch %d", firstLine(l.Pattern, 60), l.Epoch)
		if slices.Contains(g.Renewed, l.Pattern) {
			s += " renewed"
		}
		parts = append(parts, s)
	}
	out := "lock " + strings.Join(parts, ", ")
	if n := len(g.Preempted); n > 0 {
		p := g.Preempted[0]
		out += fmt.Sprintf(" (preempted %s epoch %d on %s", p.Actor, p.Epoch, firstLine(p.Pattern, 60))
		if n > 1 {
			out += fmt.Sprintf(" and %d more", n-1)
		}
		out += ")"
	}
	return out
}

func (r *rule) unlock() (string, error) {
	var b UnlockBody
	if err := r.body(&b); err != nil {
		return "", err
	}
	if err := checkPatterns(b.Patterns); err != nil {
		return "", err
	}
	if len(b.Epochs) != len(b.Patterns) {
		return "", errs.New(errs.Usage, "unlock gives one epoch per pattern")
	}
	s, err := loadPaths(r.t, r.now)
	if err != nil {
		return "", err
	}
	var parts []string
	for i, p := range b.Patterns {
		pl, ok, err := r.t.pathLock(p)
		if err != nil {
			return "", err
		}
		// An expired lock may still be unlocked by its holder, as a cell may be
		// released: nobody took it (its epoch would differ).
		if err := r.heldBy(pl, ok, b.Epochs[i]); err != nil {
			return "", err
		}
		if err := r.freeLock(s, pl, false); err != nil {
			return "", err
		}
		parts = append(parts, fmt.Sprintf("%s epoch %d", firstLine(p, 60), b.Epochs[i]))
	}
	if err := s.flush(); err != nil {
		return "", err
	}
	if len(parts) > 3 {
		parts = append(parts[:3], fmt.Sprintf("+%d more", len(parts)-3))
	}
	return "unlock " + strings.Join(parts, ", "), nil
}

func (r *rule) wait() (string, error) {
	var b WaitBody
	if err := r.body(&b); err != nil {
		return "", err
	}
	s, err := loadPaths(r.t, r.now)
	if err != nil {
		return "", err
	}
	if b.Clear {
		if b.Pattern != "" || b.Holders != nil {
			return "", errs.New(errs.Usage, "a clearing wait names no pattern or holders")
		}
		had, err := s.clearWait(r.e.Actor)
		if err != nil {
			return "", err
		}
		if !had {
			return "", errs.New(errs.Usage, "%s has no wait to clear", r.e.Actor)
		}
		if err := s.flush(); err != nil {
			return "", err
		}
		return "wait cleared by " + r.e.Actor, nil
	}
	if err := checkPattern(b.Pattern); err != nil {
		return "", err
	}
	if err := s.charge(request{r.e.Actor, b.Pattern}); err != nil {
		return "", err
	}
	want := s.blockers(r.e.Actor, b.Pattern)
	if len(want) == 0 {
		return "", errs.New(errs.Usage, "%s is not blocked for %s: lock it instead", b.Pattern, r.e.Actor)
	}
	if !slices.Equal(want, b.Holders) {
		return "", errs.New(errs.Usage, "wait must name exactly the holders blocking %s: %v", b.Pattern, want).With("holders", want)
	}
	w := &Wait{Waiter: r.e.Actor, Pattern: b.Pattern, Holders: want, RecordedAt: r.ts(0), ExpiresAt: r.ts(WaitTTL), Seq: r.e.Seq}
	if err := r.t.put(waitKey(w.Waiter), w); err != nil {
		return "", err
	}
	iw := indexedWait{Waiter: w.Waiter, Pattern: w.Pattern, ExpiresAt: w.ExpiresAt}
	if i, ok := s.waitAt(w.Waiter); ok {
		s.waits[i] = iw
	} else {
		s.waits = slices.Insert(s.waits, i, iw)
	}
	s.dirtyW = true
	// A wait replacing an expired one keeps its record: it was just rewritten.
	s.deleted = slices.DeleteFunc(s.deleted, func(k string) bool { return k == waitKey(w.Waiter) })
	if err := s.flush(); err != nil {
		return "", err
	}
	return fmt.Sprintf("wait: %s for %s held by %s", r.e.Actor, firstLine(b.Pattern, 60), strings.Join(want, ", ")), nil
}

func (r *rule) breakDeadlocks() (string, any, error) {
	var b BreakBody
	if err := r.body(&b); err != nil {
		return "", nil, err
	}
	s, err := loadPaths(r.t, r.now)
	if err != nil {
		return "", nil, err
	}
	g, err := s.graph()
	if err != nil {
		return "", nil, err
	}
	if len(g.Cycles) == 0 {
		return "", nil, errs.New(errs.Usage, "no deadlock to break")
	}
	if !equalCycles(g.Cycles, b.Cycles) || !slices.Equal(g.Victims, b.Victims) {
		return "", nil, errs.New(errs.Usage, "break must name the cycles %v and the victims %v", g.Cycles, g.Victims).
			With("cycles", g.Cycles).With("victims", g.Victims)
	}
	res := &BreakResult{Cycles: g.Cycles, Victims: g.Victims, Released: []Preempted{}}
	for _, v := range g.Victims {
		var held []indexedLock
		for _, l := range s.locks {
			if l.Actor == v {
				held = append(held, l)
			}
		}
		for _, l := range held {
			pl, _, err := r.t.pathLock(l.Pattern)
			if err != nil {
				return "", nil, err
			}
			if err := r.freeLock(s, pl, true); err != nil {
				return "", nil, err
			}
			res.Released = append(res.Released, Preempted{Pattern: l.Pattern, Actor: v, Epoch: l.Epoch})
		}
		if _, err := s.clearWait(v); err != nil {
			return "", nil, err
		}
	}
	if err := s.flush(); err != nil {
		return "", nil, err
	}
	return fmt.Sprintf("break %d deadlock(s): victims %s, %d lock(s) released", len(g.Cycles),
		strings.Join(g.Victims, ", "), len(res.Released)), res, nil
}

func equalCycles(a, b [][]string) bool {
	return slices.EqualFunc(a, b, func(x, y []string) bool { return slices.Equal(x, y) })
}

// ---------------------------------------------------------------- deadlocks

// graph builds the wait-for graph of the live waits, finds its strongly
// connected components (Tarjan) and picks the victims: in each component the
// actor of lowest priority, ties going to the actor whose name sorts last
// (byte order). A victim's wait is cleared, which removes its edges out; the
// components are then recomputed on what remains, until no cycle is left.
// Cycles are the components of the first round.
func (s *paths) graph() (*WaitGraph, error) {
	reqs := make([]request, len(s.waits))
	for i, w := range s.waits {
		reqs[i] = request{w.Waiter, w.Pattern}
	}
	if err := s.charge(reqs...); err != nil {
		return nil, err
	}
	g := &WaitGraph{Edges: []WaitEdge{}, Cycles: [][]string{}, Victims: []string{}}
	adj := map[string][]string{}
	for _, w := range s.waits {
		for _, h := range s.blockers(w.Waiter, w.Pattern) {
			g.Edges = append(g.Edges, WaitEdge{Waiter: w.Waiter, Holder: h, Pattern: w.Pattern})
			adj[w.Waiter] = append(adj[w.Waiter], h)
		}
	}
	for round := 0; ; round++ {
		sccs := tarjan(adj)
		if len(sccs) == 0 {
			break
		}
		if round == 0 {
			g.Cycles = sccs
		}
		for _, c := range sccs {
			v := c[0]
			for _, a := range c[1:] {
				if pa, pv := s.pol.Priority(a), s.pol.Priority(v); pa < pv || pa == pv && a > v {
					v = a
				}
			}
			g.Victims = append(g.Victims, v)
			delete(adj, v)
		}
	}
	sort.Strings(g.Victims)
	return g, nil
}

// tarjan returns the strongly connected components of at least two nodes of
// the graph adj (node -> successors, each sorted), each sorted, ordered by
// their first member. Nodes are visited in sorted order, so the result
// depends only on the graph.
func tarjan(adj map[string][]string) [][]string {
	nodes := make([]string, 0, len(adj))
	for n := range adj {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	index, low := map[string]int{}, map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	var out [][]string
	var visit func(v string)
	visit = func(v string) {
		index[v], low[v] = len(index), len(index)
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range adj[v] {
			if _, seen := index[w]; !seen {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] != index[v] {
			return
		}
		var c []string
		for {
			w := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			onStack[w] = false
			c = append(c, w)
			if w == v {
				break
			}
		}
		if len(c) > 1 {
			sort.Strings(c)
			out = append(out, c)
		}
	}
	for _, n := range nodes {
		if _, seen := index[n]; !seen {
			visit(n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}
