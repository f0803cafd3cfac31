// Package lease holds tally's rules: one pure, deterministic state machine,
//
//	Apply(state, entry) -> (changes, error)
//
// called by the writer before it appends, by verify when it replays the chain,
// and by the hooks when they check pushed entries. Nothing else decides whether
// an entry is legal. Time is the entry's timestamp, never the wall clock; facts
// that need I/O (is a process alive, does a commit exist) are gathered by the
// writer and recorded in the entry as evidence, which the rules then check for
// consistency with the state.
//
// The state is a key-value view of the ledger commit's tree (see docs/FORMAT.md
// for the layout); Apply reads only the keys it needs, so its cost does not grow
// with the number of waves or cells.
package lease

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
)

// Limits of the lease rules.
const (
	TTLMin          = 30
	TTLMax          = 86400
	TTLDefault      = 1800
	maxHoldFloor    = 30 * time.Minute
	maxCellsPerWave = 100000
	maxTextLen      = 4096
)

// Result is the outcome of applying one entry.
type Result struct {
	// Changes maps state keys to their new canonical JSON; nil deletes the key.
	Changes map[string][]byte
	// Summary is a one-line human description (the ledger commit's subject).
	Summary string
	// Effect is the kind-specific outcome (for example the granted *Lease).
	Effect any
}

// ChangesSigning reports whether the entry changed what decides signatures:
// the policy (require-signatures) or an actor's registered keys.
func (r *Result) ChangesSigning() bool {
	for k := range r.Changes {
		if k == policyKey || strings.HasPrefix(k, "keys/") {
			return true
		}
	}
	return false
}

// Keys returns the changed keys in sorted order, so callers apply them
// deterministically.
func (r *Result) Keys() []string {
	keys := make([]string, 0, len(r.Changes))
	for k := range r.Changes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Apply checks entry e against the state before it and returns the changes it
// makes. A refused entry returns an *errs.Error carrying the rule's code and
// changes nothing. Chain-level checks (seq, prev, ts order) belong to
// chain.Meta.Check and must pass first.
func Apply(state chain.KV, e *chain.Entry) (*Result, error) {
	now, err := chain.ParseTime(e.TS)
	if err != nil {
		return nil, errs.New(errs.Usage, "%v", err)
	}
	t := newTxn(state)
	r := &rule{t: t, e: e, now: now}
	var summary string
	var effect any
	switch e.Kind {
	case chain.KindGenesis:
		summary, err = "genesis", r.genesis()
	case chain.KindNote:
		summary, err = r.note()
	case chain.KindPlan:
		summary, err = r.plan()
	case chain.KindClaim:
		summary, effect, err = r.claim()
	case chain.KindRenew:
		summary, effect, err = r.renew()
	case chain.KindRelease:
		summary, err = r.release()
	case chain.KindFail:
		summary, err = r.fail()
	case chain.KindRequeue:
		summary, err = r.requeue()
	case chain.KindDone:
		summary, effect, err = r.done()
	case chain.KindPolicy:
		summary, err = r.policy()
	case chain.KindKeys:
		summary, err = r.keys()
	case chain.KindAnchor:
		summary, err = r.anchor()
	case chain.KindLock:
		summary, effect, err = r.lock()
	case chain.KindUnlock:
		summary, err = r.unlock()
	case chain.KindWait:
		summary, err = r.wait()
	case chain.KindBreak:
		summary, effect, err = r.breakDeadlocks()
	default:
		err = errs.New(errs.Usage, "unknown entry kind %q", e.Kind)
	}
	if err == nil {
		err = r.outOfRange
	}
	if err != nil {
		return nil, err
	}
	return &Result{Changes: t.writes, Summary: summary, Effect: effect}, nil
}

type rule struct {
	t   *txn
	e   *chain.Entry
	now time.Time
	// outOfRange is the refusal of the first derived time ts could not
	// store, if any.
	outOfRange error
}

// body decodes the entry body strictly: unknown fields are a malformed entry.
func (r *rule) body(v any) error {
	if err := decodeBody(r.e.Body, v); err != nil {
		return errs.New(errs.Usage, "%s body: %v", r.e.Kind, err)
	}
	return nil
}

// bodyDecoder is a json.Decoder refusing unknown fields, with the reader it
// reads from, so that one decoder decodes body after body: a decoder and its
// buffer made for each entry were ≈ 0.85 KB of the 7.9 KB a verify
// allocated an entry.
type bodyDecoder struct {
	r   bytes.Reader
	dec *json.Decoder
}

var bodyDecoders = sync.Pool{New: func() any {
	d := &bodyDecoder{}
	d.dec = json.NewDecoder(&d.r)
	d.dec.DisallowUnknownFields()
	return d
}}

// maxPooledBody is the longest body whose decoder is kept: the decoder keeps
// a buffer as long as the longest body it read, and a plan's can be megabytes.
const maxPooledBody = 64 << 10

// decodeBody decodes the first JSON value of body into v exactly as
// json.NewDecoder(bytes.NewReader(body)) with DisallowUnknownFields would
// (the same value, the same error). A decoder is reused only if it ends as a
// fresh one would begin: no error (a decoder's errors are sticky) and every
// byte of body read and consumed, none left in its buffer for the next body
// to follow.
func decodeBody(body []byte, v any) error {
	d := bodyDecoders.Get().(*bodyDecoder)
	d.r.Reset(body)
	start := d.dec.InputOffset()
	err := d.dec.Decode(v)
	if err == nil && len(body) <= maxPooledBody && d.r.Len() == 0 && d.dec.InputOffset()-start == int64(len(body)) {
		bodyDecoders.Put(d)
	}
	return err
}

// ts is the entry time plus d, as stored: every time the rules store is made
// here. A time TimeLayout cannot write (after chain.LastTime) would make each
// later read of the state fail, so the first one is kept in r.outOfRange and
// refuses the entry once its rule has run (USAGE: the entry asks for more
// than the format holds, like a TTL out of range).
func (r *rule) ts(d time.Duration) string {
	t := r.now.Add(d)
	if !chain.TimeInRange(t) && r.outOfRange == nil {
		r.outOfRange = errs.New(errs.Usage, "an entry at %s cannot store %s (its time + %s): timestamps end at %s",
			r.e.TS, t.UTC().Format(time.RFC3339Nano), d, chain.LastTime).With("limit", chain.LastTime)
	}
	return chain.FormatTime(t)
}

// after reports whether the entry time is strictly after the stored instant.
func (r *rule) after(stamp string) (bool, error) { return expiredAt(stamp, r.now) }

// NoteBody is the body of a "note" entry: free text for annotations and audits.
type NoteBody struct {
	Text string `json:"text"`
}

func (r *rule) note() (string, error) {
	var b NoteBody
	var plain bool
	if b.Text, plain = plainNoteText(r.e.Body); !plain {
		if err := r.body(&b); err != nil {
			return "", err
		}
	}
	if b.Text == "" || len(b.Text) > maxTextLen {
		return "", errs.New(errs.Usage, "note text must be 1..%d bytes", maxTextLen)
	}
	// The summary carries the text into the commit message, and git fsck
	// flags a commit with a NUL byte (nulInCommit; an error with --strict,
	// so servers with receive.fsckObjects refuse the push). Other control
	// characters are legal in a commit; human output makes them inert.
	if strings.IndexByte(b.Text, 0) >= 0 {
		return "", errs.New(errs.Usage, "note text must not contain NUL: git fsck refuses a commit carrying one")
	}
	return "note: " + firstLine(b.Text, 60), nil
}

// plainNoteText returns the text of a note body of the commonest spelling,
// {"text":"..."} with a text of printable ASCII and neither quote nor
// backslash, whose strict decode (decodeBody) is exactly those bytes; ok is
// false for every other body, which the strict decode reads. Notes are most
// of many ledgers' entries, and the decode's reflection cost more than the
// rest of a note's rule.
func plainNoteText(body []byte) (text string, ok bool) {
	const open, end = `{"text":"`, `"}`
	if len(body) < len(open)+len(end) || string(body[:len(open)]) != open || string(body[len(body)-len(end):]) != end {
		return "", false
	}
	t := body[len(open) : len(body)-len(end)]
	for _, c := range t {
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return "", false
		}
	}
	return string(t), true
}

func firstLine(s string, max int) string {
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			s = s[:i] + " …"
			break
		}
	}
	if len(s) > max {
		for max > 0 && !utf8.RuneStart(s[max]) {
			max-- // cut before a character, not inside one
		}
		s = s[:max] + "…"
	}
	return s
}

// CellRef names a cell.
type CellRef struct {
	Wave string `json:"wave"`
	Cell string `json:"cell"`
}

func (c CellRef) String() string { return c.Wave + "/" + c.Cell }

func checkIDs(w, c string) error {
	if !SafeID(w) {
		return errs.New(errs.Usage, "wave id %q is not a SafeId", w)
	}
	if !SafeID(c) {
		return errs.New(errs.Usage, "cell id %q is not a SafeId", c)
	}
	return nil
}

func checkTTL(ttl int) error {
	if ttl < TTLMin || ttl > TTLMax {
		return errs.New(errs.Usage, "ttl must be %d..%d seconds, got %d", TTLMin, TTLMax, ttl)
	}
	return nil
}

// Claim modes.
const (
	ModeClaim       = "claim"
	ModeSteal       = "steal"
	ModeReclaimDead = "reclaim-dead"
)

// Takeover kinds (Granted.Takeover): how a claim took a cell whose lease was
// still recorded.
const (
	TakeoverExpired    = "expired"
	TakeoverSteal      = "steal"
	TakeoverDeadHolder = "dead-holder"
)

// ClaimBody is the body of a "claim" entry. PID, Host, BootID, PIDNS and
// PIDStart identify the holder process for dead-holder takeover (see
// HolderID). Dead is the writer's evidence for a reclaim-dead claim: the
// holder it found not running in its own boot and PID namespace.
type ClaimBody struct {
	CellRef
	TTL      int       `json:"ttl"`
	PID      int       `json:"pid"`
	Host     string    `json:"host"`
	BootID   string    `json:"boot_id,omitempty"`
	PIDNS    uint64    `json:"pid_ns,omitempty"`
	PIDStart uint64    `json:"pid_start,omitempty"`
	Base     string    `json:"base,omitempty"`
	Mode     string    `json:"mode"`
	Next     bool      `json:"next,omitempty"` // chosen by claim --next (informational)
	Dead     *DeadPeer `json:"dead,omitempty"`
}

// DeadPeer is the evidence that a lease holder's process is gone: the
// holder's identity as its lease records it, and what the writer found.
type DeadPeer struct {
	Actor    string `json:"actor"`
	Epoch    int64  `json:"epoch"`
	Host     string `json:"host"`
	PID      int    `json:"pid"`
	BootID   string `json:"boot_id,omitempty"`
	PIDNS    uint64 `json:"pid_ns,omitempty"`
	PIDStart uint64 `json:"pid_start,omitempty"`
	Alive    bool   `json:"alive"`
}

// HolderID identifies a holder process on one machine. PID is meaningful
// only in the PID namespace PIDNS (the inode of the claiming process's
// /proc/self/ns/pid) of the kernel boot BootID
// (/proc/sys/kernel/random/boot_id): within one boot, namespace inodes are
// unique, so the pair names one process table. PIDStart, the process's start
// time in clock ticks after boot (/proc/PID/stat field 22), tells the holder
// from a later process given the same pid; 0 means it was not known when the
// claim was written. A HolderID with no BootID (written before tally recorded
// it, or where the kernel does not tell) names no process table at all.
type HolderID struct {
	Host     string
	PID      int
	BootID   string
	PIDNS    uint64
	PIDStart uint64
}

// Holder is the identity a claim records for its holder.
func (b *ClaimBody) Holder() HolderID {
	return HolderID{Host: b.Host, PID: b.PID, BootID: b.BootID, PIDNS: b.PIDNS, PIDStart: b.PIDStart}
}

// Holder is the identity the evidence names.
func (d *DeadPeer) Holder() HolderID {
	return HolderID{Host: d.Host, PID: d.PID, BootID: d.BootID, PIDNS: d.PIDNS, PIDStart: d.PIDStart}
}

// Holder is the identity of the lease's holder process.
func (l *Lease) Holder() HolderID {
	return HolderID{Host: l.Host, PID: l.PID, BootID: l.BootID, PIDNS: l.PIDNS, PIDStart: l.PIDStart}
}

// SameProcessTable reports whether a process with identity o observes the
// process table h's pid belongs to: same host, boot and PID namespace. It is
// false when either names none (no BootID): such a holder cannot be observed.
func (h HolderID) SameProcessTable(o HolderID) bool {
	return h.BootID != "" && h.Host == o.Host && h.BootID == o.BootID && h.PIDNS == o.PIDNS
}

// checkHolder checks the form of a recorded identity: a boot id is a
// lowercase UUID and comes with a namespace, and a start time needs both.
func checkHolder(h HolderID) error {
	if h.PID < 0 || h.Host == "" {
		return errs.New(errs.Usage, "claim must record the holder's host, and a pid ≥ 0 (0: no holder process)")
	}
	if (h.BootID == "") != (h.PIDNS == 0) || (h.PIDStart != 0 && (h.BootID == "" || h.PID == 0)) {
		return errs.New(errs.Usage, "claim must record boot_id and pid_ns together, and pid_start only with them and a pid")
	}
	if h.BootID != "" && !isUUID(h.BootID) {
		return errs.New(errs.Usage, "boot_id %q is not a lowercase UUID", h.BootID)
	}
	return nil
}

// isUUID reports whether s has the form the kernel writes a boot id in:
// 8-4-4-4-12 lowercase hex digits.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				return false
			}
		}
	}
	return true
}

// Granted is the effect of a successful claim.
type Granted struct {
	Lease    *Lease `json:"lease"`
	Takeover string `json:"takeover,omitempty"` // TakeoverExpired, TakeoverSteal or TakeoverDeadHolder
	Prior    *Lease `json:"prior,omitempty"`
}

func (r *rule) claim() (string, any, error) {
	var b ClaimBody
	if err := r.body(&b); err != nil {
		return "", nil, err
	}
	if err := checkIDs(b.Wave, b.Cell); err != nil {
		return "", nil, err
	}
	if err := checkTTL(b.TTL); err != nil {
		return "", nil, err
	}
	if err := checkHolder(b.Holder()); err != nil {
		return "", nil, err
	}
	switch b.Mode {
	case ModeClaim, ModeSteal, ModeReclaimDead:
	default:
		return "", nil, errs.New(errs.Usage, "unknown claim mode %q", b.Mode)
	}
	c, err := r.t.cell(b.Wave, b.Cell)
	if err != nil {
		return "", nil, err
	}
	g := &Granted{}
	switch c.State {
	case Done, Failed:
		return "", nil, errs.New(errs.CellState, "cell %s/%s is %s; cannot claim", b.Wave, b.Cell, c.State).With("state", c.State)
	case Pending:
		blocked, err := r.t.unfinishedDeps(c)
		if err != nil {
			return "", nil, err
		}
		if len(blocked) > 0 {
			return "", nil, errs.New(errs.CellState, "cell %s/%s blocked by unfinished deps: %s", b.Wave, b.Cell, strings.Join(blocked, ", ")).
				With("state", c.State).With("blocked_by", blocked)
		}
	case Claimed:
		l := c.Lease
		if l == nil {
			return "", nil, errs.New(errs.Corrupt, "cell %s/%s is claimed without a lease", b.Wave, b.Cell)
		}
		expired, err := r.after(l.ExpiresAt)
		if err != nil {
			return "", nil, err
		}
		pastMaxHold, err := r.after(l.MaxHoldUntil)
		if err != nil {
			return "", nil, err
		}
		switch {
		case expired:
			g.Takeover = TakeoverExpired
		case b.Mode == ModeSteal && pastMaxHold:
			g.Takeover = TakeoverSteal
		case l.Actor == r.e.Actor:
			// Retrying cannot help the holder: its lease only ends by renew,
			// release, fail, done or expiry, so the answer is final (exit 2).
			return "", nil, errs.New(errs.LeaseOwned, "you already hold cell %s/%s (epoch %d) until %s: extend it with 'tally renew %s/%s --epoch %d'",
				b.Wave, b.Cell, l.Epoch, l.ExpiresAt, b.Wave, b.Cell, l.Epoch).With("holder", l.Actor).With("epoch", l.Epoch).
				With("expires_at", l.ExpiresAt).With("yours", true)
		case b.Mode == ModeSteal:
			return "", nil, errs.New(errs.StealDenied, "cell %s/%s held by %s until max-hold %s; steal window not open",
				b.Wave, b.Cell, l.Actor, l.MaxHoldUntil).With("holder", l.Actor).With("epoch", l.Epoch).
				With("max_hold_until", l.MaxHoldUntil)
		case b.Mode == ModeReclaimDead && deadHolder(b, l):
			g.Takeover = TakeoverDeadHolder
		default:
			return "", nil, errs.New(errs.LeaseHeld, "cell %s/%s leased to %s (epoch %d) until %s",
				b.Wave, b.Cell, l.Actor, l.Epoch, l.ExpiresAt).With("holder", l.Actor).With("epoch", l.Epoch).
				With("expires_at", l.ExpiresAt)
		}
		g.Prior = l
	}
	// A cell's declared paths are held by its holder, so they may not overlap
	// another actor's live path lock or claimed cell: the push hooks would
	// refuse that work anyway.
	if len(c.Paths) > 0 {
		s, err := loadPaths(r.t, r.now)
		if err != nil {
			return "", nil, err
		}
		own := 0 // the cell's paths under a live old lease are replaced, not added
		reqs := make([]request, len(c.Paths))
		for i, p := range c.Paths {
			reqs[i] = request{r.e.Actor, p}
		}
		for _, h := range s.cells {
			if h.cell == b.CellRef {
				own++
			}
		}
		if err := s.checkHolds(len(c.Paths), own); err != nil {
			return "", nil, err
		}
		if err := s.charge(reqs...); err != nil {
			return "", nil, err
		}
		for _, p := range c.Paths {
			for _, cf := range s.conflicts(r.e.Actor, p) {
				if cf.hold.cell != b.CellRef { // the cell's own paths, under its old lease, do not count
					return "", nil, heldErr(cf)
				}
			}
		}
	}
	ttl := time.Duration(b.TTL) * time.Second
	c.Epoch++
	c.Lease = &Lease{
		Actor: r.e.Actor, PID: b.PID, Host: b.Host, BootID: b.BootID, PIDNS: b.PIDNS, PIDStart: b.PIDStart, Epoch: c.Epoch,
		AcquiredAt: r.ts(0), HeartbeatAt: r.ts(0), ExpiresAt: r.ts(ttl),
		MaxHoldUntil: r.ts(max(2*ttl, maxHoldFloor)), TTLSeconds: b.TTL, Base: b.Base,
	}
	g.Lease = c.Lease
	c.History = append(c.History, r.e.Seq)
	if err := r.t.setCellState(c, Claimed, false); err != nil {
		return "", nil, err
	}
	s := fmt.Sprintf("claim %s/%s epoch %d", b.Wave, b.Cell, c.Epoch)
	if g.Takeover != "" {
		s += fmt.Sprintf(" (%s from %s epoch %d)", g.Takeover, g.Prior.Actor, g.Prior.Epoch)
	}
	return s, g, nil
}

// deadHolder reports whether the claim carries evidence that the current
// holder's process is gone. Only a process in the holder's own process table
// can observe that: the claimant must record the lease's host, boot and PID
// namespace, and the evidence must name the lease's holder exactly (actor,
// epoch and the whole HolderID, start time included). A lease that records
// no boot id cannot be reclaimed by such a claim (fail closed). A claim that
// itself records none, with evidence naming none, against a lease that
// records none, is judged as before boot ids were recorded (same host,
// actor, epoch and pid), so ledgers written then still verify; tally never
// writes one now (see FORMAT.md §5).
func deadHolder(b ClaimBody, l *Lease) bool {
	d := b.Dead
	if d == nil || d.Alive || d.Actor != l.Actor || d.Epoch != l.Epoch || d.Holder() != l.Holder() {
		return false
	}
	taker, holder := b.Holder(), l.Holder()
	if holder.PID == 0 {
		return false // no holder process was recorded: nothing can be seen gone
	}
	if holder.BootID == "" && taker.BootID == "" {
		return taker.Host == holder.Host
	}
	return taker.SameProcessTable(holder)
}

// EpochBody is the body of renew, release, fail and done: the lease the actor
// believes it holds.
type EpochBody struct {
	CellRef
	Epoch int64 `json:"epoch"`
}

// RenewBody is the body of a "renew" entry.
type RenewBody struct {
	EpochBody
	TTL int `json:"ttl"`
}

// holder checks that the entry's actor holds the cell's lease at epoch
// (CheckHolder at the entry's time).
func (r *rule) holder(b EpochBody, live bool) (*Cell, error) {
	if err := checkIDs(b.Wave, b.Cell); err != nil {
		return nil, err
	}
	c, err := r.t.cell(b.Wave, b.Cell)
	if err != nil {
		return nil, err
	}
	if err := CheckHolder(c, b, r.e.Actor, live, r.now); err != nil {
		return nil, err
	}
	return c, nil
}

// CheckHolder is the holder rule: actor holds the lease on cell c (named by
// b) at epoch b.Epoch, and with live the lease has not expired at now. It is
// the one definition: renew, release, fail and done apply it to their entry,
// and `tally run` to the lease it records evidence under, so they answer
// alike for the same lease. A stale epoch (older than the last one granted)
// is checked first: the epoch is the fencing token, so a holder whose lease
// was taken over — by anyone — learns that it was fenced off
// (EPOCH-MISMATCH), even after the cell moved on. Then the state
// (CELL-STATE unless claimed), the actor (ACTOR-MISMATCH), the exact epoch
// (EPOCH-MISMATCH) and, with live, the expiry (LEASE-EXPIRED).
func CheckHolder(c *Cell, b EpochBody, actor string, live bool, now time.Time) error {
	l := c.Lease
	if b.Epoch < c.Epoch {
		e := errs.New(errs.EpochMismatch, "%s/%s is at epoch %d: epoch %d was fenced off", b.Wave, b.Cell, c.Epoch, b.Epoch).With("epoch", c.Epoch)
		if l != nil {
			e = e.With("holder", l.Actor)
		}
		return e
	}
	if c.State != Claimed || l == nil {
		return errs.New(errs.CellState, "cell %s/%s is %s, not claimed", b.Wave, b.Cell, c.State).With("state", c.State)
	}
	if l.Actor != actor {
		return errs.New(errs.ActorMismatch, "lease on %s/%s held by %s, not %s", b.Wave, b.Cell, l.Actor, actor).
			With("holder", l.Actor).With("epoch", l.Epoch)
	}
	if l.Epoch != b.Epoch {
		return errs.New(errs.EpochMismatch, "lease on %s/%s is at epoch %d, not %d", b.Wave, b.Cell, l.Epoch, b.Epoch).
			With("holder", l.Actor).With("epoch", l.Epoch)
	}
	if live {
		expired, err := expiredAt(l.ExpiresAt, now)
		if err != nil {
			return err
		}
		if expired {
			return errs.New(errs.LeaseExpired, "lease on %s/%s expired at %s", b.Wave, b.Cell, l.ExpiresAt).
				With("expires_at", l.ExpiresAt)
		}
	}
	return nil
}

func (r *rule) renew() (string, any, error) {
	var b RenewBody
	if err := r.body(&b); err != nil {
		return "", nil, err
	}
	if err := checkTTL(b.TTL); err != nil {
		return "", nil, err
	}
	c, err := r.holder(b.EpochBody, true)
	if err != nil {
		return "", nil, err
	}
	past, err := r.after(c.Lease.MaxHoldUntil)
	if err != nil {
		return "", nil, err
	}
	if past {
		return "", nil, errs.New(errs.LeaseMaxHold, "lease on %s/%s is past max_hold_until %s; it cannot be renewed in this epoch",
			b.Wave, b.Cell, c.Lease.MaxHoldUntil).With("max_hold_until", c.Lease.MaxHoldUntil)
	}
	l := *c.Lease
	l.HeartbeatAt, l.ExpiresAt, l.TTLSeconds = r.ts(0), r.ts(time.Duration(b.TTL)*time.Second), b.TTL
	c.Lease = &l
	c.History = append(c.History, r.e.Seq)
	if err := r.t.put(cellKey(c.Wave, c.ID), c); err != nil {
		return "", nil, err
	}
	return fmt.Sprintf("renew %s/%s epoch %d", b.Wave, b.Cell, l.Epoch), &Granted{Lease: &l}, nil
}

func (r *rule) release() (string, error) {
	var b EpochBody
	if err := r.body(&b); err != nil {
		return "", err
	}
	// An expired lease may still be released by its holder: nobody else has
	// taken it (the epoch would differ), and giving it back early helps everyone.
	c, err := r.holder(b, false)
	if err != nil {
		return "", err
	}
	c.Lease = nil
	c.History = append(c.History, r.e.Seq)
	if err := r.t.setCellState(c, Pending, true); err != nil {
		return "", err
	}
	return fmt.Sprintf("release %s/%s epoch %d", b.Wave, b.Cell, b.Epoch), nil
}

// FailBody is the body of a "fail" entry.
type FailBody struct {
	EpochBody
	Reason string `json:"reason,omitempty"`
}

func (r *rule) fail() (string, error) {
	var b FailBody
	if err := r.body(&b); err != nil {
		return "", err
	}
	if len(b.Reason) > maxTextLen {
		return "", errs.New(errs.Usage, "reason longer than %d bytes", maxTextLen)
	}
	c, err := r.holder(b.EpochBody, true)
	if err != nil {
		return "", err
	}
	c.Lease, c.Reason = nil, b.Reason
	c.History = append(c.History, r.e.Seq)
	if err := r.t.setCellState(c, Failed, false); err != nil {
		return "", err
	}
	return fmt.Sprintf("fail %s/%s epoch %d", b.Wave, b.Cell, b.Epoch), nil
}

func (r *rule) requeue() (string, error) {
	var b CellRef
	if err := r.body(&b); err != nil {
		return "", err
	}
	if err := checkIDs(b.Wave, b.Cell); err != nil {
		return "", err
	}
	c, err := r.t.cell(b.Wave, b.Cell)
	if err != nil {
		return "", err
	}
	if c.State != Failed {
		return "", errs.New(errs.CellState, "requeue needs a failed cell; %s/%s is %s", b.Wave, b.Cell, c.State).With("state", c.State)
	}
	if c.Lease != nil {
		return "", errs.New(errs.CellState, "requeue refused: %s/%s has a lease", b.Wave, b.Cell)
	}
	blocked, err := r.t.unfinishedDeps(c)
	if err != nil {
		return "", err
	}
	c.Reason = ""
	c.History = append(c.History, r.e.Seq)
	if err := r.t.setCellState(c, Pending, len(blocked) == 0); err != nil {
		return "", err
	}
	return fmt.Sprintf("requeue %s/%s", b.Wave, b.Cell), nil
}
