package tally

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/ledger"
	"github.com/tally-dev/tally/pathspec"
	"github.com/tally-dev/tally/receipt"
)

// static builds the same entry whatever the tip.
func static(kind chain.Kind, body any) ledger.BuildFunc {
	return func(*ledger.Snapshot, time.Time) (*ledger.Draft, error) {
		return &ledger.Draft{Kind: kind, Body: body}, nil
	}
}

// InitResult is the outcome of Init.
type InitResult struct {
	Appended
	Ref    string `json:"ref"`
	Origin string `json:"origin"`
}

// Init writes the genesis entry, which switches the new ledger to the
// chunked receipts index (lease.ReceiptIndexChunked). An empty origin gets a default naming the
// repository plus a random suffix, so independently created ledgers differ.
// Unless newLedger, it first refuses while a remote of the clone holds a
// ledger (ledger.RefuseInitBesideRemote): a second genesis forks for good.
func (c *Client) Init(origin string, newLedger bool) (*InitResult, error) {
	if tip, err := c.L.Tip(); err != nil {
		return nil, err
	} else if !newLedger && (tip.IsZero() || c.Remote() != "") { // a local ledger: ALREADY-INITIALIZED, no need to ask
		if err := c.L.RefuseInitBesideRemote(); err != nil {
			return nil, err
		}
	}
	if origin == "" {
		var b [4]byte
		rand.Read(b[:])
		name := c.L.Repo.WorkTree
		if name == "" {
			name = c.L.Repo.CommonDir
		}
		origin = "tally/" + filepath.Base(name) + "/" + hex.EncodeToString(b[:])
	}
	chunked := lease.ReceiptIndexChunked
	ap, err := c.append(static(chain.KindGenesis, chain.GenesisBody{Origin: origin, ReceiptIndex: &chunked}))
	if err != nil {
		return nil, err
	}
	return &InitResult{appendedOf(ap), c.L.Ref, origin}, nil
}

// Note appends an annotation.
func (c *Client) Note(text string) (*Appended, error) {
	return c.simple("note", lease.NoteBody{Text: text})
}

// PlanResult is the outcome of Plan.
type PlanResult struct {
	Appended
	Wave  string `json:"wave"`
	Cells int    `json:"cells"`
}

// Plan adds a wave; path patterns are normalized first.
func (c *Client) Plan(body *lease.PlanBody) (*PlanResult, error) {
	if err := lease.NormalizePlan(body); err != nil {
		return nil, err
	}
	ap, err := c.simple("plan", body)
	if err != nil {
		return nil, err
	}
	return &PlanResult{*ap, body.Wave, len(body.Cells)}, nil
}

func (c *Client) simple(kind chain.Kind, body any) (*Appended, error) {
	ap, err := c.append(static(kind, body))
	if err != nil {
		return nil, err
	}
	r := appendedOf(ap)
	return &r, nil
}

// ClaimOptions select what to claim and how.
type ClaimOptions struct {
	Wave, Cell  string // the cell, unless Next
	Next        bool   // claim the first ready cell
	NextWave    string // with Next: only this wave
	TTL         int    // seconds; 0 means lease.TTLDefault
	PID         int    // holder process for dead-holder takeover
	Steal       bool   // take a lease past its max-hold time
	ReclaimDead bool   // take a lease whose holder process, in this boot and PID namespace, is gone
}

// LeaseResult is the outcome of an operation that grants or extends a lease.
type LeaseResult struct {
	Appended
	lease.CellRef
	*lease.Granted
}

// Claim claims a cell.
func (c *Client) Claim(o ClaimOptions) (*LeaseResult, error) {
	if o.Next == (o.Wave != "" || o.Cell != "") {
		return nil, errs.New(errs.Usage, "give either a cell or next")
	}
	if o.Steal && o.ReclaimDead {
		return nil, errs.New(errs.Usage, "steal and reclaim-dead exclude each other")
	}
	if remote := c.Remote(); o.ReclaimDead && remote != "" {
		// A server cannot observe another machine's processes, and the taker's
		// word is all a dead-holder claim carries: through a shared remote a
		// live lease ends only by expiry or max-hold steal (FORMAT.md §9a).
		return nil, errs.New(errs.DeadHolderRemote, "claim --reclaim-dead is refused through remote %s: nobody there can check "+
			"that the holder's process is gone; wait for the lease to expire, or claim --steal past its max-hold", remote).
			With("remote", remote)
	}
	if _, _, err := processTable(); o.ReclaimDead && err != nil {
		// Without a process table to name, no lease here records one and
		// no holder can be seen to be gone: say so rather than guess.
		return nil, errs.New(errs.DeadHolderUnchecked, "claim --reclaim-dead is refused: this system cannot tell whether a holder's process is gone (%v); "+
			"wait for the lease to expire, or claim --steal past its max-hold", err)
	}
	if o.TTL == 0 {
		o.TTL = lease.TTLDefault
	}
	mode := lease.ModeClaim
	switch {
	case o.Steal:
		mode = lease.ModeSteal
	case o.ReclaimDead:
		mode = lease.ModeReclaimDead
	}
	if o.Next {
		// Polling agents ask often when nothing is ready: answer from a tip
		// that needs no round trip, without taking the writer lock (the
		// append re-decides under it).
		s, ok, err := c.src.LocalHead()
		if err != nil {
			return nil, err
		}
		if ok {
			if cand, err := lease.Next(s, o.NextWave, c.L.EntryTime(s)); err != nil {
				return nil, err
			} else if cand == nil {
				return nil, noReadyCell(s, o.NextWave)
			}
			c.L.Lend(s) // the append decides again, on s if the tip has not moved
		}
	}
	self, base := c.claimant(o.PID)
	if o.Next && mode == lease.ModeClaim {
		n := nextClaim(o, self, base)
		aps, err := c.appendSteps([]handStep{{Op: OpClaimNext, Claim: &n}})
		if err != nil {
			return nil, err
		}
		return leaseResult(aps[0]), nil
	}
	ap, err := c.append(claimBuild(o, mode, self, base))
	if err != nil {
		return nil, err
	}
	return leaseResult(ap), nil
}

// claimant is who claims, as the lease records it (this host, process pid
// and the process table it runs in, when known), and the code base: the
// work tree's HEAD, if any.
func (c *Client) claimant(pid int) (self lease.HolderID, base string) {
	if head, err := c.L.Repo.Head(); err == nil {
		base = head.String()
	}
	self = lease.HolderID{Host: c.host, PID: pid}
	if boot, ns, err := processTable(); err == nil {
		self.BootID, self.PIDNS, self.PIDStart = boot, ns, processStart(pid)
	}
	return self, base
}

// leaseResult is the outcome of the claim ap (of the cell its body names).
func leaseResult(ap *ledger.Appended) *LeaseResult {
	b, _ := claimOf(&ap.Applied)
	return &LeaseResult{appendedOf(ap), b.CellRef, ap.Result.Effect.(*lease.Granted)}
}

// claimBuild builds the claim of o (mode, holder self, code base base) on
// the state it is given: the one build of a claim, for local,
// compare-and-swap, sequenced and handed appends alike.
func claimBuild(o ClaimOptions, mode string, self lease.HolderID, base string) ledger.BuildFunc {
	return func(s *ledger.Snapshot, now time.Time) (*ledger.Draft, error) {
		b := lease.ClaimBody{CellRef: lease.CellRef{Wave: o.Wave, Cell: o.Cell}, TTL: o.TTL, PID: self.PID,
			Host: self.Host, BootID: self.BootID, PIDNS: self.PIDNS, PIDStart: self.PIDStart, Base: base, Mode: mode, Next: o.Next}
		if o.Next {
			cand, err := lease.Next(s, o.NextWave, now)
			if err != nil {
				return nil, err
			}
			if cand == nil {
				return nil, noReadyCell(s, o.NextWave)
			}
			b.CellRef = lease.CellRef{Wave: cand.Wave, Cell: cand.Cell}
		}
		if mode == lease.ModeReclaimDead {
			b.Dead = deadHolderEvidence(s, b.CellRef, self)
		}
		return &ledger.Draft{Kind: chain.KindClaim, Body: b}, nil
	}
}

// noReadyCell is claim --next's answer when no cell is claimable on s:
// NO-READY-CELL (retryable) with the number of open cells (lease.Open), or,
// when none is open, PLAN-COMPLETE: every cell is done or failed, and no
// retry can change that until someone requeues a cell or plans more.
func noReadyCell(s *ledger.Snapshot, wave string) error {
	open, err := lease.Open(s, wave)
	if err != nil {
		return err
	}
	if open == 0 {
		scope := "the plan"
		if wave != "" {
			scope = "wave " + wave
		}
		return errs.New(errs.PlanComplete, "every cell of %s is done or failed: nothing is left to claim (requeue a failed cell, or plan more)", scope).
			With("open", 0)
	}
	return errs.New(errs.NoReadyCell, "no cell is claimable now; %d open cells wait for deps or leases", open).With("open", open)
}

// ClaimWait is Claim that keeps trying, for at most wait, while the answer is
// NO-READY-CELL or LEASE-HELD: after each refusal it waits for the source's
// tip to move (an entry may finish a dependency or end a lease) or for a
// second to pass (a lease may expire), then claims again. PLAN-COMPLETE, like
// any other refusal, ends it at once. After wait it is WAIT-TIMEOUT with the
// last refusal's details (waitTimeout), as for Lock. onWait, if set, is called with the first
// refusal when the waiting starts. Once ctx is done it claims no more and
// returns the last refusal, within a second: an MCP client that gave up on the
// call (its request timeout, or the agent cancelled) must not be granted a
// lease it will never hear of.
func (c *Client) ClaimWait(ctx context.Context, o ClaimOptions, wait time.Duration, onWait func(error)) (*LeaseResult, error) {
	if wait <= 0 {
		return c.Claim(o)
	}
	deadline := time.Now().Add(wait)
	// Watch from before the first attempt, so an entry that lands between a
	// refusal and the wait still wakes it.
	w, err := c.src.Watch()
	if err != nil {
		return nil, err
	}
	for {
		res, err := c.Claim(o)
		if err == nil {
			return res, nil
		}
		refusal := errs.From(err)
		if refusal.Code != errs.NoReadyCell && refusal.Code != errs.LeaseHeld {
			return nil, err
		}
		if !time.Now().Before(deadline) {
			return nil, waitTimeout(wait, refusal)
		}
		if ctx.Err() != nil {
			return nil, err
		}
		if onWait != nil {
			onWait(refusal)
			onWait = nil
		}
		until := time.Now().Add(time.Second)
		if deadline.Before(until) {
			until = deadline
		}
		w.Await(until)
	}
}

// deadHolderEvidence checks, as the process self, whether the current holder
// of the cell is still running. It returns evidence only when the holder's
// lease was recorded in self's process table (host, boot, PID namespace) and
// its process is gone there (holderGone); the rules accept a reclaim-dead
// claim only with that evidence, from a claimant in that process table.
func deadHolderEvidence(s *ledger.Snapshot, ref lease.CellRef, self lease.HolderID) *lease.DeadPeer {
	cell, err := lease.ReadCell(s, ref.Wave, ref.Cell)
	if err != nil || cell.Lease == nil || !holderGone(cell.Lease, self) {
		return nil
	}
	l := cell.Lease
	return &lease.DeadPeer{Actor: l.Actor, Epoch: l.Epoch, Host: l.Host, PID: l.PID,
		BootID: l.BootID, PIDNS: l.PIDNS, PIDStart: l.PIDStart, Alive: false}
}

// Renew extends the actor's lease; ttl 0 keeps the lease's current TTL.
func (c *Client) Renew(wave, cell string, epoch int64, ttl int) (*LeaseResult, error) {
	ref := lease.CellRef{Wave: wave, Cell: cell}
	ap, err := c.appendStep(handStep{Op: OpRenew, repeatedSteps: repeatedSteps{Renew: &lease.RenewBody{EpochBody: lease.EpochBody{CellRef: ref, Epoch: epoch}, TTL: ttl}}})
	if err != nil {
		return nil, err
	}
	return &LeaseResult{appendedOf(ap), ref, ap.Result.Effect.(*lease.Granted)}, nil
}

// Release gives a cell back (pending again, epoch kept).
func (c *Client) Release(wave, cell string, epoch int64) (*Appended, error) {
	return c.simpleStep(handStep{Op: OpRelease, repeatedSteps: repeatedSteps{Release: &lease.EpochBody{CellRef: lease.CellRef{Wave: wave, Cell: cell}, Epoch: epoch}}})
}

// simpleStep appends the one step st (appendStep), for the commands whose
// result is the entry alone.
func (c *Client) simpleStep(st handStep) (*Appended, error) {
	ap, err := c.appendStep(st)
	if err != nil {
		return nil, err
	}
	r := appendedOf(ap)
	return &r, nil
}

// appendStep appends the one step st (appendSteps).
func (c *Client) appendStep(st handStep) (*ledger.Appended, error) {
	aps, err := c.appendSteps([]handStep{st})
	if err != nil {
		return nil, err
	}
	return aps[0], nil
}

// Fail marks the actor's claimed cell failed.
func (c *Client) Fail(wave, cell string, epoch int64, reason string) (*Appended, error) {
	return c.simpleStep(handStep{Op: OpFail, repeatedSteps: repeatedSteps{Fail: &lease.FailBody{EpochBody: lease.EpochBody{CellRef: lease.CellRef{Wave: wave, Cell: cell}, Epoch: epoch}, Reason: reason}}})
}

// Requeue puts a failed cell back to pending.
func (c *Client) Requeue(wave, cell string) (*Appended, error) {
	return c.simple("requeue", lease.CellRef{Wave: wave, Cell: cell})
}

// DoneResult is the outcome of Done.
type DoneResult struct {
	Appended
	Receipt *lease.ReceiptRef `json:"receipt"`
	Note    string            `json:"note"` // the notes ref, or why the note was not written
	// NotesPush is, in remote mode, what pushing the notes to the remote
	// did (receipt.PushNotes); pending notes go with the next done or sync.
	NotesPush *receipt.NotesPush `json:"notes_push,omitempty"`
	// Warnings are what a reviewer would ask about the receipt, though it
	// is valid: a commit that changes nothing since the base, evidence of a
	// command that failed, edits left uncommitted under the cell's paths.
	Warnings []string `json:"warnings"`
	// Landed is, for done --merge in a cell's worktree, the commit that
	// landed on the target branch and the tip it landed on.
	Landed *Landing `json:"landed,omitempty"`
	// BranchPush is, for a done in a cell's worktree in remote mode, the
	// push of the receipt's commit as the cell's branch (FinishWorktree).
	BranchPush *BranchPush `json:"branch_push,omitempty"`
}

// Done finishes the actor's cell with a receipt and points a git note on the
// receipted commit at it: on a local ledger in the receipt's own append
// (receipt.BesideNote), in remote mode once the entry has landed on the
// remote. The receipt is the record; the note is a convenience, so failing
// to write it is reported, not fatal.
func (c *Client) Done(req receipt.Request) (*DoneResult, error) {
	res, _, err := c.done(req, nil)
	return res, err
}

// done is Done, with then, if not nil, claimed as a second entry of the
// receipt's append (on the state the receipt leaves), and its entry
// returned if it landed: a claim the rules refuse there is left out and the
// receipt lands alone (appendSteps), so then never decides whether the
// done stands.
func (c *Client) done(req receipt.Request, then *NextClaim) (*DoneResult, *ledger.Appended, error) {
	// The work tree does not move with the ledger: its status runs in a git
	// process beside the append instead of after it.
	status := c.startStatus()
	prep, err := receipt.Prepare(c.L, req)
	if err != nil {
		return nil, nil, err
	}
	draft := prep.Draft()
	steps := []handStep{{Op: OpDone, Done: &draft}}
	if then != nil {
		steps = append(steps, handStep{Op: OpClaimNext, Claim: then})
	}
	if c.Remote() == "" {
		// The note goes with the receipt: its lock is made before the
		// writer lock too (ledger.ExpectBeside).
		c.L.ExpectBeside()
	}
	aps, err := c.appendSteps(steps)
	if err != nil {
		return nil, nil, err
	}
	var next *ledger.Appended
	if len(aps) > 1 {
		next = aps[1]
	}
	ap := aps[0]
	ref := ap.Result.Effect.(*lease.ReceiptRef)
	prep.Taken()
	var body lease.DoneBody
	if err := json.Unmarshal(ap.Entry.Body, &body); err != nil {
		return nil, nil, errs.Wrap(errs.Internal, err, "receipt entry %d", ap.Entry.Seq)
	}
	res := &DoneResult{Appended: appendedOf(ap), Receipt: ref, Note: receipt.NotesRef, Warnings: doneWarnings(&body, c.cellPaths(ap.Commit, lease.CellRef{Wave: ref.Wave, Cell: ref.Cell}), status)}
	if c.Remote() == "" && ap.BesideErr == nil {
		return res, next, nil // the note went with the receipt
	}
	// In remote mode, or when the note could not go with the receipt
	// (another writer held or moved the notes ref, or the holder that
	// appended it died before answering), it is an append of its own: it
	// adds only a line the notes lack.
	who, err := receipt.AddDoneNote(c.L.Repo, c.L.NotesLock(), ap)
	if err != nil {
		res.Note = "not written: " + err.Error()
		return res, next, nil
	}
	if c.Remote() != "" {
		// The entry has landed, so the server's hook finds the receipt the
		// note names. A note that does not reach the remote now stays
		// pending in the local notes: done succeeded all the same.
		res.NotesPush = c.pushNotes(c.Remote(), ap.Commit, who)
	}
	return res, next, nil
}

// cellPaths returns the declared paths of cell in the state at commit, read
// when first asked for (doneWarnings asks only when edits are left
// uncommitted); nil when they cannot be read.
func (c *Client) cellPaths(commit gitstore.ObjectID, cell lease.CellRef) func() []string {
	return func() []string {
		s, err := c.L.SnapshotAt(commit)
		if err != nil {
			return nil
		}
		cl, err := lease.ReadCell(s, cell.Wave, cell.Cell)
		if err != nil {
			return nil
		}
		return cl.Paths
	}
}

// DoneNextResult is the outcome of DoneNext: the done, which stands, and
// as "next" what claiming the next ready cell gave, the object claim --next
// prints: its result with "ok": true, or its error object with "ok": false.
type DoneNextResult struct {
	*DoneResult
	Next map[string]any `json:"next,omitempty"`
	// Claim is the claim's result (nil if it failed); NextErr why it failed.
	Claim   *LeaseResult `json:"-"`
	NextErr error        `json:"-"`
	// NextWorktree is the worktree NextWorktree made for the claim.
	NextWorktree *Worktree `json:"-"`
}

// DoneNext finishes the actor's cell as Done does, then claims the next ready
// cell as ClaimWait(ctx, o, wait, onWait) does; o must be a plain claim with
// Next. Its error is the done's only: once the done stands, a claim that
// finds nothing or fails is reported in the result.
//
// On a local ledger, when a cell is ready on the state the receipt leaves,
// the receipt and the claim are one append: two entries, each its own
// commit, in one pack, and one move of the ledger ref, so a crash leaves both
// or neither. Otherwise (nothing ready, the claim refused, or a remote:
// its sequencer decides claims) the claim is an append of its own after the
// done's note, with ClaimWait's waiting.
func (c *Client) DoneNext(ctx context.Context, req receipt.Request, o ClaimOptions, wait time.Duration, onWait func(error)) (*DoneNextResult, error) {
	if !o.Next || o.Wave != "" || o.Cell != "" || o.Steal || o.ReclaimDead {
		return nil, errs.New(errs.Usage, "done's next claim is a plain claim of the next ready cell")
	}
	if o.TTL == 0 {
		o.TTL = lease.TTLDefault
	}
	var then *NextClaim
	if c.Remote() == "" {
		self, base := c.claimant(o.PID)
		n := nextClaim(o, self, base)
		then = &n
	}
	d, ap, err := c.done(req, then)
	if err != nil {
		return nil, err
	}
	res := &DoneNextResult{DoneResult: d}
	if ap != nil {
		res.Claim = leaseResult(ap)
	} else {
		res.Claim, res.NextErr = c.ClaimWait(ctx, o, wait, onWait)
	}
	if res.NextErr != nil {
		res.Next = ErrorObject(res.NextErr)
	} else if res.Next, err = ResultObject(res.Claim); err != nil {
		return nil, errs.Wrap(errs.Internal, err, "next: result")
	}
	return res, nil
}

// worktreeStatus is a running `git status` of the work tree (startStatus).
type worktreeStatus struct {
	done chan struct{}
	out  []byte
	err  error
}

// startStatus starts `git status` of the work tree, or returns nil for a
// bare repository. --no-optional-locks keeps it from refreshing the index
// into .git/index under index.lock: a done must not take a lock the user's
// own git commands (and the other agents' done) need. It only reads, so a
// status nobody waits for (the done failed) is left to finish. When the
// index proves the tracked files unchanged (gitstore's WorkTreeClean), the
// answer is git's empty one without a git process: that process was a
// sixth of a cell's CPU in the drain through MCP servers.
func (c *Client) startStatus() *worktreeStatus {
	if c.L.Repo.WorkTree == "" {
		return nil
	}
	st := &worktreeStatus{done: make(chan struct{})}
	go func() {
		defer close(st.done)
		if c.L.Repo.WorkTreeClean() {
			return
		}
		st.out, st.err = c.L.Repo.Git("--no-optional-locks", "status", "--porcelain=v1", "-z", "--untracked-files=no")
	}()
	return st
}

// wait returns the status output once git has exited.
func (st *worktreeStatus) wait() ([]byte, error) {
	<-st.done
	return st.out, st.err
}

// doneWarnings are the questions a receipt raises (DoneResult.Warnings).
// Uncommitted edits (status, nil for a bare repository) count under the
// cell's declared paths, or anywhere in the work tree when it declares none;
// untracked files do not.
func doneWarnings(b *lease.DoneBody, paths func() []string, status *worktreeStatus) []string {
	w := []string{}
	if len(b.Changed) == 0 {
		w = append(w, fmt.Sprintf("commit %.12s changes nothing since the base %.12s", b.Commit, b.Base))
	}
	for _, ev := range b.Evidence {
		if ev.ExitCode != 0 {
			w = append(w, fmt.Sprintf("the evidence records a failed command: %s exited %d", strings.Join(ev.Argv, " "), ev.ExitCode))
		}
	}
	if status == nil {
		return w
	}
	out, err := status.wait()
	if err != nil {
		return append(w, "could not tell whether edits are left uncommitted: "+err.Error())
	}
	var left, scope []string
	read := false // scope holds the cell's paths
	recs := strings.Split(string(out), "\x00")
	for i := 0; i < len(recs); i++ {
		rec := recs[i]
		if len(rec) < 4 {
			continue // the empty tail
		}
		if rec[0] == 'R' || rec[0] == 'C' {
			i++ // a rename or copy: its source path is the next record
		}
		if !read {
			scope, read = paths(), true
		}
		if p := rec[3:]; len(scope) == 0 || pathspec.MatchAny(scope, p) {
			left = append(left, p)
		}
	}
	if len(left) > 0 {
		w = append(w, fmt.Sprintf("uncommitted edits are not in the receipt: %s", strings.Join(left, ", ")))
	}
	return w
}

// pushNotes pushes the local receipt notes remote lacks, judged against the
// remote's ledger at tip (receipt.PushNotes). A local failure is reported in
// the result too: the notes are a convenience beside the ledger.
func (c *Client) pushNotes(remote string, tip gitstore.ObjectID, who gitstore.Ident) *receipt.NotesPush {
	s, err := c.L.SnapshotAt(tip)
	var np *receipt.NotesPush
	if err == nil {
		np, err = receipt.PushNotes(c.L, s, remote, who)
	}
	if err != nil {
		return &receipt.NotesPush{Remote: remote, Pushed: []string{}, Pending: []string{}, Error: err.Error()}
	}
	return np
}

// SyncResult is the outcome of Sync.
type SyncResult struct {
	*ledger.SyncReport
	NotesPush *receipt.NotesPush `json:"notes_push,omitempty"`
}

// Sync reconciles the local ledger with remote's (ledger.Sync), then pushes
// the receipt notes the remote lacks (those a done could not push), judged
// against the synced ledger. A notes push that does not land is reported,
// not an error: the ledger is the record.
func (c *Client) Sync(remote string) (*SyncResult, error) {
	rep, err := c.L.Sync(remote)
	if err != nil {
		return nil, err
	}
	tip, err := gitstore.ParseObjectID(rep.Tip)
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "sync tip")
	}
	who := c.Actor // sync needs no actor; the notes commit needs a name
	if who == "" {
		who = "tally"
	}
	return &SyncResult{rep, c.pushNotes(remote, tip, gitstore.Ident{Name: who, Email: who, When: time.Now().Unix(), TZ: "+0000"})}, nil
}
