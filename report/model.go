// Package report builds the auditor's view of a ledger: a verified timeline
// of every lease (cells and path locks) with its takeovers, renewals,
// receipts and failures, per-actor and per-wave summaries, and the
// verification it rests on, rendered as one self-contained HTML file.
//
// The model is built from the entries as the verifier applies them
// (ledger.VerifyRangeEach): each lease's bounds come from the rules' own
// effects (lease.Granted, lease.LockGrant, lease.BreakResult, the done
// receipt), never from a second reading of the rules. Only entries that
// verified are drawn; if verification stops at an entry, the failure is shown
// first and the timeline ends before it.
//
// Rendering approach: the page carries the model as one inline JSON document
// (columnar arrays with interned actor names, gzipped and base64-encoded, so
// 100k entries stay a few MB; the browser's DecompressionStream unpacks it)
// and a small inline script that draws only the lanes scrolled into view, as
// SVG, merging bars narrower than a pixel. Why not the alternatives: a fully
// server-rendered SVG of 100k entries is tens of MB of DOM that Chromium lays
// out all at once; a canvas is fast but leaves nothing in the DOM to inspect,
// select, link or test; a vendored charting library would be more code to
// keep and review than the few hundred lines here, and none of them verifies
// anything. The header and the summaries are plain server-rendered HTML, so
// the verification result reads even with scripts off.
//
// Security: everything in an entry (notes, reasons, actor names, paths) is
// attacker-controlled. The HTML parts go through html/template's contextual
// escaping; the JSON travels as base64, so no entry text can end the script
// element that carries it; the script builds nodes with createElementNS and
// sets text with textContent, never innerHTML. A Content-Security-Policy
// meta tag forbids every fetch, so the page cannot load anything.
package report

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/tally-dev/tally"
	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/ledger"
)

// Options select what a report shows.
type Options struct {
	// Wave, if set, keeps only the lanes and summaries of that wave (path
	// locks belong to no wave and are left out).
	Wave string
	// Since and Until, if not zero, keep the entries whose timestamp falls in
	// [Since, Until] and the leases overlapping that window, clipped to it.
	Since, Until time.Time
}

// Outcomes: how a lease bar ends.
const (
	Held      = "held"      // still live at the end of the report
	Released  = "released"  // released or unlocked by its holder
	DoneOut   = "done"      // a receipt ended it
	FailedOut = "failed"    // its holder failed the cell
	Expired   = "expired"   // it lapsed at expires_at (taken over afterwards, or not)
	Taken     = "taken"     // taken over live: steal or dead-holder
	Preempted = "preempted" // a higher-priority lock took it
	Broken    = "broken"    // a deadlock break released it
)

// Bar is one lease: one epoch of a cell or of a path lock.
type Bar struct {
	Lane     int
	Start    time.Time
	End      time.Time // when it ended (or the report's end, while Held)
	GrantSeq uint64
	EndSeq   int64 // the entry that ended it; -1 for Held and for expiries nobody recorded
	Epoch    int64
	Actor    string
	Outcome  string
	// Takeover is how this lease was taken from a prior holder ("expired",
	// "steal", "dead-holder", "preempt"), with that holder and epoch.
	Takeover   string
	Prior      string
	PriorEpoch int64
	// By names who ended it when that was not its holder (taken, preempted).
	By      string
	Renews  []uint64 // seqs of its renewals
	Reason  string   // fail reason, lock reason
	Receipt *Receipt // for done
	expires time.Time
	// Start and End clipped to the window; these are the lease's own.
	granted, ended time.Time
}

// Receipt is what a done bar links to.
type Receipt struct {
	Seq      uint64     `json:"seq"`
	Commit   string     `json:"commit"`
	Tree     string     `json:"tree"`
	Base     string     `json:"base"`
	Changed  []string   `json:"changed"`
	More     int        `json:"more,omitempty"` // changed paths left out
	Evidence []Evidence `json:"evidence"`
}

// Evidence summarizes one command run recorded in a receipt.
type Evidence struct {
	Argv       string `json:"argv"`
	ExitCode   int    `json:"exit"`
	DurationMS int64  `json:"ms"`
}

// Lane is one row of the timeline: a cell (Wave set) or a locked pattern.
type Lane struct {
	Wave string
	Name string
}

// Entry is one verified entry as the report lists it.
type Entry struct {
	Seq     uint64
	TS      time.Time
	Kind    chain.Kind
	Actor   string
	Summary string
}

// Verification is the header: what was verified and how it went.
type Verification struct {
	OK          bool          `json:"ok"`
	Entries     uint64        `json:"entries"` // entries verified
	HeadSeq     int64         `json:"head_seq"`
	Root        string        `json:"root"`
	Commit      string        `json:"commit"`
	Signed      int           `json:"signed"` // verified entries whose commit is signed
	Unsigned    []Entry       `json:"-"`      // verified entries whose commit is not
	RequireSigs bool          `json:"require_signatures"`
	Checkpoints []Checkpoint  `json:"checkpoints"`
	Failure     *Finding      `json:"failure,omitempty"`
	Findings    []Finding     `json:"findings"`
	Elapsed     time.Duration `json:"-"`
}

// Checkpoint is one saved checkpoint checked against the verified ledger.
type Checkpoint struct {
	Ref      string `json:"ref"`
	Size     uint64 `json:"size"`
	SignedBy int    `json:"signed_by"`
	Error    string `json:"error,omitempty"`
}

// Finding is a verification failure or a notable fact, at an entry.
type Finding struct {
	Seq     int64     `json:"seq"` // -1: not at an entry
	Code    errs.Code `json:"code"`
	Message string    `json:"message"`
}

// ActorSummary is what one actor did in the report's window.
type ActorSummary struct {
	Actor          string
	Claims         int
	Locks          int
	TakeoversMade  int
	TakeoversTaken int // takeovers suffered
	Receipts       int
	Fails          int
	Expired        int
	Waits          int
	Held           time.Duration
}

// WaveSummary is the same per wave.
type WaveSummary struct {
	Wave      string
	Cells     int
	Claims    int
	Takeovers int
	Receipts  int
	Fails     int
	Expired   int
	Held      time.Duration
}

// Model is everything a report shows.
type Model struct {
	Verify  Verification
	From    time.Time // the window: first and last instant drawn
	To      time.Time
	Lanes   []Lane
	Bars    []*Bar
	Entries []Entry
	Actors  []ActorSummary
	Waves   []WaveSummary
	Options Options
}

// builder follows the verified entries and keeps the open leases.
type builder struct {
	m        *Model
	lanes    map[Lane]int
	openCell map[int]*Bar // by lane
	openLock map[int]*Bar
	all      []*Bar
	entries  []Entry
	waits    map[string]int
	cells    map[string]int // planned cells per wave
	last     time.Time
}

func newBuilder() *builder {
	return &builder{m: &Model{}, lanes: map[Lane]int{}, openCell: map[int]*Bar{}, openLock: map[int]*Bar{},
		waits: map[string]int{}, cells: map[string]int{}}
}

func (b *builder) lane(l Lane) int {
	i, ok := b.lanes[l]
	if !ok {
		i = len(b.m.Lanes)
		b.lanes[l] = i
		b.m.Lanes = append(b.m.Lanes, l)
	}
	return i
}

// maxChanged bounds the changed paths a receipt carries into the page.
const maxChanged = 50

// add follows one verified entry.
func (b *builder) add(ap *ledger.Applied) error {
	e := ap.Entry
	ts, err := chain.ParseTime(e.TS)
	if err != nil {
		return err
	}
	b.last = ts
	b.entries = append(b.entries, Entry{Seq: e.Seq, TS: ts, Kind: e.Kind, Actor: e.Actor, Summary: ap.Result.Summary})
	switch e.Kind {
	case chain.KindPlan:
		var p lease.PlanBody
		if err := json.Unmarshal(e.Body, &p); err != nil {
			return err
		}
		for _, c := range p.Cells {
			b.lane(Lane{Wave: p.Wave, Name: c.ID})
		}
		b.cells[p.Wave] += len(p.Cells)
	case chain.KindClaim:
		var body lease.ClaimBody
		if err := json.Unmarshal(e.Body, &body); err != nil {
			return err
		}
		g := ap.Result.Effect.(*lease.Granted)
		ln := b.lane(Lane{Wave: body.Wave, Name: body.Cell})
		nb := b.open(ln, e, ts, g.Lease.Epoch, g.Lease.ExpiresAt)
		if g.Takeover != "" {
			nb.Takeover, nb.Prior, nb.PriorEpoch = g.Takeover, g.Prior.Actor, g.Prior.Epoch
			if prior := b.openCell[ln]; prior != nil {
				if g.Takeover == "expired" {
					b.close(prior, prior.expires, -1, Expired)
				} else {
					b.close(prior, ts, int64(e.Seq), Taken)
					prior.By = e.Actor
				}
			}
		}
		b.openCell[ln] = nb
	case chain.KindRenew:
		var body lease.EpochBody
		if err := json.Unmarshal(e.Body, &body); err != nil {
			return err
		}
		if bar := b.openCell[b.lane(Lane{Wave: body.Wave, Name: body.Cell})]; bar != nil {
			bar.Renews = append(bar.Renews, e.Seq)
			bar.expires, _ = chain.ParseTime(ap.Result.Effect.(*lease.Granted).Lease.ExpiresAt)
		}
	case chain.KindRelease, chain.KindFail, chain.KindDone:
		var body lease.FailBody
		if err := json.Unmarshal(e.Body, &body); err != nil {
			return err
		}
		ln := b.lane(Lane{Wave: body.Wave, Name: body.Cell})
		bar := b.openCell[ln]
		if bar == nil {
			break
		}
		delete(b.openCell, ln)
		switch e.Kind {
		case chain.KindRelease:
			// A holder may release a lease that already lapsed: it ended then.
			if bar.expires.Before(ts) {
				b.close(bar, bar.expires, int64(e.Seq), Expired)
			} else {
				b.close(bar, ts, int64(e.Seq), Released)
			}
		case chain.KindFail:
			b.close(bar, ts, int64(e.Seq), FailedOut)
			bar.Reason = body.Reason
		case chain.KindDone:
			var d lease.DoneBody
			if err := json.Unmarshal(e.Body, &d); err != nil {
				return err
			}
			b.close(bar, ts, int64(e.Seq), DoneOut)
			bar.Receipt = receiptOf(e.Seq, &d)
		}
	case chain.KindLock:
		g := ap.Result.Effect.(*lease.LockGrant)
		for _, p := range g.Preempted {
			if bar := b.openLock[b.lane(Lane{Name: p.Pattern})]; bar != nil && bar.Epoch == p.Epoch {
				b.close(bar, ts, int64(e.Seq), Preempted)
				bar.By = e.Actor
				delete(b.openLock, bar.Lane)
			}
		}
		for _, l := range g.Locks {
			ln := b.lane(Lane{Name: l.Pattern})
			prior := b.openLock[ln]
			if prior != nil && prior.Epoch == l.Epoch {
				prior.Renews = append(prior.Renews, e.Seq)
				prior.expires, _ = chain.ParseTime(l.ExpiresAt)
				continue
			}
			nb := b.open(ln, e, ts, l.Epoch, l.ExpiresAt)
			nb.Reason = l.Reason
			if pre := preemptedOn(g.Preempted, l.Pattern); pre != nil {
				nb.Takeover, nb.Prior, nb.PriorEpoch = "preempt", pre.Actor, pre.Epoch
			} else if prior != nil {
				// A new epoch over a lease nobody gave back: it had lapsed.
				b.close(prior, prior.expires, -1, Expired)
				if prior.Actor != e.Actor {
					nb.Takeover, nb.Prior, nb.PriorEpoch = "expired", prior.Actor, prior.Epoch
				}
			}
			b.openLock[ln] = nb
		}
	case chain.KindUnlock:
		var body lease.UnlockBody
		if err := json.Unmarshal(e.Body, &body); err != nil {
			return err
		}
		for _, p := range body.Patterns {
			ln := b.lane(Lane{Name: p})
			if bar := b.openLock[ln]; bar != nil {
				delete(b.openLock, ln)
				if bar.expires.Before(ts) {
					b.close(bar, bar.expires, int64(e.Seq), Expired)
				} else {
					b.close(bar, ts, int64(e.Seq), Released)
				}
			}
		}
	case chain.KindBreak:
		for _, r := range ap.Result.Effect.(*lease.BreakResult).Released {
			ln := b.lane(Lane{Name: r.Pattern})
			if bar := b.openLock[ln]; bar != nil {
				delete(b.openLock, ln)
				b.close(bar, ts, int64(e.Seq), Broken)
				bar.By = e.Actor
			}
		}
	case chain.KindWait:
		b.waits[e.Actor]++
	}
	return nil
}

func preemptedOn(pre []lease.Preempted, pattern string) *lease.Preempted {
	for i := range pre {
		if pre[i].Pattern == pattern {
			return &pre[i]
		}
	}
	return nil
}

func receiptOf(seq uint64, d *lease.DoneBody) *Receipt {
	r := &Receipt{Seq: seq, Commit: d.Commit, Tree: d.Tree, Base: d.Base, Changed: d.Changed, Evidence: []Evidence{}}
	if len(r.Changed) > maxChanged {
		r.Changed, r.More = r.Changed[:maxChanged], len(r.Changed)-maxChanged
	}
	for _, ev := range d.Evidence {
		r.Evidence = append(r.Evidence, Evidence{Argv: strings.Join(ev.Argv, " "), ExitCode: ev.ExitCode, DurationMS: ev.DurationMS})
	}
	return r
}

func (b *builder) open(lane int, e *chain.Entry, ts time.Time, epoch int64, expires string) *Bar {
	exp, _ := chain.ParseTime(expires)
	bar := &Bar{Lane: lane, Start: ts, GrantSeq: e.Seq, EndSeq: -1, Epoch: epoch, Actor: e.Actor, Outcome: Held, expires: exp}
	b.all = append(b.all, bar)
	return bar
}

func (b *builder) close(bar *Bar, at time.Time, seq int64, outcome string) {
	bar.End, bar.EndSeq, bar.Outcome = at, seq, outcome
}

// finish ends the leases still open at the last entry, then applies the
// options' window and computes the summaries.
func (b *builder) finish(opt Options) {
	for _, open := range []map[int]*Bar{b.openCell, b.openLock} {
		for _, bar := range open {
			if bar.expires.Before(b.last) {
				b.close(bar, bar.expires, -1, Expired)
			} else {
				bar.End = b.last
			}
		}
	}
	m := b.m
	m.Options = opt
	from, to := opt.Since, opt.Until
	if from.IsZero() && len(b.entries) > 0 {
		from = b.entries[0].TS
	}
	if to.IsZero() {
		to = b.last
	}
	m.From, m.To = from, to
	for _, e := range b.entries {
		if !e.TS.Before(from) && !e.TS.After(to) {
			m.Entries = append(m.Entries, e)
		}
	}
	// Lanes: the selected wave's cells (all waves and the locks without one).
	keep := make([]int, len(m.Lanes))
	var lanes []Lane
	for i, l := range m.Lanes {
		keep[i] = -1
		if opt.Wave == "" || l.Wave == opt.Wave {
			keep[i] = len(lanes)
			lanes = append(lanes, l)
		}
	}
	// Cell lanes grouped by wave in plan order, then the locks by pattern.
	order := make([]int, len(lanes))
	for i := range order {
		order[i] = i
	}
	waveRank := map[string]int{}
	for _, l := range lanes {
		if _, ok := waveRank[l.Wave]; !ok && l.Wave != "" {
			waveRank[l.Wave] = len(waveRank)
		}
	}
	sort.SliceStable(order, func(i, j int) bool {
		a, c := lanes[order[i]], lanes[order[j]]
		if (a.Wave == "") != (c.Wave == "") {
			return a.Wave != ""
		}
		if a.Wave == "" {
			return a.Name < c.Name
		}
		return waveRank[a.Wave] < waveRank[c.Wave]
	})
	pos := make([]int, len(lanes))
	m.Lanes = make([]Lane, len(lanes))
	for p, i := range order {
		pos[i] = p
		m.Lanes[p] = lanes[i]
	}
	actors := map[string]*ActorSummary{}
	actor := func(a string) *ActorSummary {
		s := actors[a]
		if s == nil {
			s = &ActorSummary{Actor: a}
			actors[a] = s
		}
		return s
	}
	waves := map[string]*WaveSummary{}
	for w, n := range b.cells {
		if opt.Wave == "" || w == opt.Wave {
			waves[w] = &WaveSummary{Wave: w, Cells: n}
		}
	}
	for _, bar := range b.all {
		if keep[bar.Lane] < 0 || bar.End.Before(from) || bar.Start.After(to) {
			continue
		}
		bar.Lane = pos[keep[bar.Lane]]
		bar.granted, bar.ended = bar.Start, bar.End
		if bar.Start.Before(from) {
			bar.Start = from
		}
		if bar.End.After(to) {
			bar.End = to
		}
		m.Bars = append(m.Bars, bar)
		l := m.Lanes[bar.Lane]
		s, ws := actor(bar.Actor), waves[l.Wave]
		if ws == nil {
			ws = &WaveSummary{} // locks: counted per actor only
		}
		held := bar.End.Sub(bar.Start)
		s.Held += held
		ws.Held += held
		if l.Wave != "" {
			s.Claims++
			ws.Claims++
		} else {
			s.Locks++
		}
		if bar.Takeover != "" {
			s.TakeoversMade++
			actor(bar.Prior).TakeoversTaken++
			ws.Takeovers++
		}
		switch bar.Outcome {
		case DoneOut:
			s.Receipts++
			ws.Receipts++
		case FailedOut:
			s.Fails++
			ws.Fails++
		case Expired:
			s.Expired++
			ws.Expired++
		}
	}
	for a, n := range b.waits {
		actor(a).Waits = n
	}
	for _, s := range actors {
		m.Actors = append(m.Actors, *s)
	}
	sort.Slice(m.Actors, func(i, j int) bool { return m.Actors[i].Actor < m.Actors[j].Actor })
	for _, w := range waves {
		m.Waves = append(m.Waves, *w)
	}
	sort.Slice(m.Waves, func(i, j int) bool { return m.Waves[i].Wave < m.Waves[j].Wave })
}

// Build replays the ledger tip of c from genesis through the verifier and
// returns the model of what verified. A verification failure is not an
// error: the model says so (Verify.Failure) and holds the entries before it.
// Saved checkpoints (<namespace>/checkpoints/*) are checked against the
// verified ledger; a bad one is a finding.
func Build(c *tally.Client, opt Options) (*Model, error) {
	l := c.L
	head, err := l.Head()
	if err != nil {
		return nil, err
	}
	b := newBuilder()
	var buildErr error
	start := time.Now()
	rep, verr := l.VerifyRangeEach(gitstore.ObjectID{}, head.Commit, func(ap *ledger.Applied) error {
		if err := b.add(ap); err != nil {
			buildErr = fmt.Errorf("entry %d: %w", ap.Entry.Seq, err)
			return buildErr
		}
		return nil
	})
	if buildErr != nil {
		return nil, buildErr
	}
	v := &b.m.Verify
	v.HeadSeq, v.Findings, v.Checkpoints = -1, []Finding{}, []Checkpoint{}
	if verr != nil {
		f := findingOf(verr)
		v.Failure = &f
		v.Entries = uint64(len(b.entries))
		v.HeadSeq = int64(len(b.entries)) - 1
	} else {
		v.OK, v.Entries, v.HeadSeq, v.Root, v.Commit = true, rep.Entries, int64(rep.Head.Seq), rep.Root.String(), rep.Commit.String()
		if err := b.signatures(l, head); err != nil {
			return nil, err
		}
		if err := b.checkpoints(c, head); err != nil {
			return nil, err
		}
	}
	v.Elapsed = time.Since(start)
	b.finish(opt)
	return b.m, nil
}

// findingOf turns a verification error into a finding at its seq.
func findingOf(err error) Finding {
	e := errs.From(err)
	f := Finding{Seq: -1, Code: e.Code, Message: e.Message}
	switch s := e.Details["seq"].(type) {
	case uint64:
		f.Seq = int64(s)
	case int:
		f.Seq = int64(s)
	}
	return f
}

// signatures counts the verified entries whose commit is signed (verify
// checked each against the actor's registered keys) and reads whether the
// policy at the head requires signatures.
func (b *builder) signatures(l *ledger.Ledger, head *ledger.Snapshot) error {
	p, err := lease.ReadPolicy(head)
	if err != nil {
		return err
	}
	b.m.Verify.RequireSigs = p.RequireSignatures
	db, err := l.Repo.Objects()
	if err != nil {
		return err
	}
	// The walk goes from the head back to genesis: the i-th commit read is
	// entry len-1-i.
	seq := len(b.entries)
	for cur := head.Commit; !cur.IsZero(); {
		seq--
		cm, err := db.ReadCommit(cur)
		if err != nil {
			return errs.Wrap(errs.Corrupt, err, "ledger commit %s", cur)
		}
		if cm.Signature != "" {
			b.m.Verify.Signed++
		} else if seq >= 0 {
			b.m.Verify.Unsigned = append(b.m.Verify.Unsigned, b.entries[seq])
		}
		cur = gitstore.ObjectID{}
		if len(cm.Parents) > 0 {
			cur = cm.Parents[0]
		}
	}
	return nil
}

// checkpoints checks every saved checkpoint against the verified head.
func (b *builder) checkpoints(c *tally.Client, head *ledger.Snapshot) error {
	l := c.L
	out, err := l.Repo.Git("for-each-ref", "--format=%(refname) %(objectname)", l.Namespace+"/checkpoints/")
	if err != nil {
		return errs.Wrap(errs.Internal, err, "git for-each-ref")
	}
	db, err := l.Repo.Objects()
	if err != nil {
		return err
	}
	v := &b.m.Verify
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		ref, hex, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		cp := Checkpoint{Ref: ref}
		id, err := gitstore.ParseObjectID(hex)
		var text []byte
		if err == nil {
			var typ gitstore.ObjectType
			if typ, text, err = db.Read(id); err == nil && typ != gitstore.BlobObject {
				err = fmt.Errorf("%s is not a blob", ref)
			}
		}
		var checked []tally.CheckpointCheck
		if err == nil {
			checked, err = c.CheckCheckpoints(head.Commit, [][]byte{text}, nil)
		}
		if err != nil {
			e := errs.From(err)
			cp.Error = string(e.Code) + ": " + e.Message
			v.Findings = append(v.Findings, Finding{Seq: -1, Code: e.Code, Message: ref + ": " + e.Message})
		} else {
			cp.Size, cp.SignedBy = checked[0].Checkpoint.Size, len(checked[0].SignedBy)
		}
		v.Checkpoints = append(v.Checkpoints, cp)
	}
	return nil
}
