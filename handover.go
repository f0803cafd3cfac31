package tally

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/ledger"
	"github.com/tally-dev/tally/receipt"
)

// The intents of group commit (FORMAT.md §9, "Group commit"): every
// append an agent repeats (a done, a claim of the next ready cell, a renew,
// a release, a lock, an unlock) and a request a sequencer serves are
// appended through appendSteps, as steps. The same steps become the
// entries whether this process appends them or hands them, as an intent,
// to the writer lock's holder, which decodes them with decodeIntent, or
// sends them to the remote's sequencer: one encoding and one way to build
// them, for every command and the MCP tools.

// handIntent is the intent a writer hands the writer lock's holder: the
// steps of one operation, appended in order as Actor. Now is the writer's
// clock (chain time): its entries carry the time its own append would give
// them, raised to the last entry's.
type handIntent struct {
	V     int        `json:"v"`
	Actor string     `json:"actor"`
	Now   string     `json:"now"`
	Steps []handStep `json:"steps"`
}

// handIntentVersion is the version of handIntent; a holder does not take an
// intent of another.
const handIntentVersion = 1

// opServe is the op of a step only a hand-over carries: a sequenced
// request the server serves (ServeRequest).
const opServe = "serve"

// handStep is one entry of an intent: its Op, and the one member that op
// names (only): Done, a receipt (the body as receipt.Prepared.Draft gives
// it, its base and changed paths decided on the state it lands on); Claim,
// a claim of the next ready cell; one of repeatedSteps; or Request, a
// request a sequencer serves. Nonce is the entry's nonce, by which its
// writer finds it if the holder dies before answering.
type handStep struct {
	Op    string          `json:"op"`
	Nonce string          `json:"nonce"`
	Done  *lease.DoneBody `json:"done,omitempty"`
	Claim *NextClaim      `json:"claim,omitempty"`
	repeatedSteps
	Request *servedRequest `json:"request,omitempty"`
}

// repeatedSteps are the steps of the appends agents repeat, which a
// hand-over and a sequenced request (Intent) carry alike, each named after
// its op.
type repeatedSteps struct {
	Renew   *lease.RenewBody  `json:"renew,omitempty"` // TTL 0: the lease's current TTL
	Release *lease.EpochBody  `json:"release,omitempty"`
	Fail    *lease.FailBody   `json:"fail,omitempty"`
	Lock    *LockStep         `json:"lock,omitempty"`
	Unlock  *lease.UnlockBody `json:"unlock,omitempty"`
}

// LockStep is a lock entry as a step carries it: the patterns, the TTL (0:
// what the actor's live locks among them keep, else lease.TTLDefault), the
// reason, and Epochs to renew locks the actor holds (one for all patterns,
// or one per pattern); without Epochs, which holders it preempts is
// decided on the state it lands on.
type LockStep struct {
	Patterns []string `json:"patterns"`
	TTL      int      `json:"ttl,omitempty"`
	Reason   string   `json:"reason,omitempty"`
	Epochs   []int64  `json:"epochs,omitempty"`
}

// only reports whether st has the member its op names and no other.
func (st *handStep) only() bool {
	set := map[string]bool{OpDone: st.Done != nil, OpClaimNext: st.Claim != nil, OpRenew: st.Renew != nil,
		OpRelease: st.Release != nil, OpFail: st.Fail != nil, OpLock: st.Lock != nil, OpUnlock: st.Unlock != nil, opServe: st.Request != nil}
	n := 0
	for _, v := range set {
		if v {
			n++
		}
	}
	return n == 1 && set[st.Op]
}

// build is the build of st as actor on l's repository (beside, for a local
// ledger: a receipt's note goes with its entry), carrying st's nonce. A
// served request is built by serveBuild.
func (st handStep) build(l *ledger.Ledger, actor string, beside bool) (ledger.BuildFunc, error) {
	if !chain.IsLowerHex(st.Nonce, 32) {
		return nil, errs.New(errs.Usage, "intent step: nonce %q is not 32 lowercase hex digits", st.Nonce)
	}
	if !st.only() || st.Op == opServe {
		return nil, errs.New(errs.Usage, "intent step: op %q without its member alone", st.Op)
	}
	var b ledger.BuildFunc
	switch st.Op {
	case OpDone:
		prep, err := receipt.Resume(l, *st.Done)
		if err != nil {
			return nil, err
		}
		b = receiptBuild(l, prep, beside)
	case OpClaimNext:
		b = st.Claim.build()
	case OpRenew:
		b = renewBuild(*st.Renew)
	case OpRelease:
		b = static(chain.KindRelease, *st.Release)
	case OpFail:
		b = static(chain.KindFail, *st.Fail)
	case OpLock:
		var err error
		if b, err = st.Lock.build(actor); err != nil {
			return nil, err
		}
	case OpUnlock:
		pats, eps, err := normalizeLocks(st.Unlock.Patterns, st.Unlock.Epochs)
		if err != nil {
			return nil, err
		}
		b = static(chain.KindUnlock, lease.UnlockBody{Patterns: pats, Epochs: eps})
	}
	return withNonce(b, st.Nonce), nil
}

// withNonce is b, its entry carrying nonce.
func withNonce(b ledger.BuildFunc, nonce string) ledger.BuildFunc {
	return func(s *ledger.Snapshot, now time.Time) (*ledger.Draft, error) {
		d, err := b(s, now)
		if d != nil {
			d.Nonce = nonce
		}
		return d, err
	}
}

// renewBuild is the build of the renew r, its TTL, when 0, the lease's
// current one (else lease.TTLDefault) on the state it lands on.
func renewBuild(r lease.RenewBody) ledger.BuildFunc {
	return func(s *ledger.Snapshot, _ time.Time) (*ledger.Draft, error) {
		b := r
		if b.TTL == 0 {
			b.TTL = lease.TTLDefault
			if cl, err := lease.ReadCell(s, b.Wave, b.Cell); err == nil && cl.Lease != nil {
				b.TTL = cl.Lease.TTLSeconds
			}
		}
		return &ledger.Draft{Kind: chain.KindRenew, Body: b}, nil
	}
}

// build is the build of ls as actor, its patterns normalized
// (normalizeLocks) and its TTL and preemptions decided on the state it
// lands on.
func (ls *LockStep) build(actor string) (ledger.BuildFunc, error) {
	pats, eps, err := normalizeLocks(ls.Patterns, ls.Epochs)
	if err != nil {
		return nil, err
	}
	return func(s *ledger.Snapshot, now time.Time) (*ledger.Draft, error) {
		b := lease.LockBody{Patterns: pats, Reason: ls.Reason, Epochs: eps}
		if len(eps) == 0 {
			if b.Preempts, err = lease.PlanLock(s, actor, pats, now); err != nil {
				return nil, err
			}
		}
		if b.TTL, err = lockTTL(s, actor, pats, ls.TTL, now); err != nil {
			return nil, err
		}
		return &ledger.Draft{Kind: chain.KindLock, Body: b}, nil
	}, nil
}

// receiptBuild is the build of the receipt prep on the state it lands on,
// with its note beside it when beside (a local ledger).
func receiptBuild(l *ledger.Ledger, prep *receipt.Prepared, beside bool) ledger.BuildFunc {
	return func(s *ledger.Snapshot, _ time.Time) (*ledger.Draft, error) {
		body, err := prep.Body(s)
		if err != nil {
			return nil, err
		}
		d := &ledger.Draft{Kind: chain.KindDone, Body: body}
		if beside {
			d.Beside = receipt.BesideNote(l.Repo)
		}
		return d, nil
	}
}

// appendSteps appends steps as the client's actor, each entry built on the
// state the previous one leaves: locally with a ledger.Group's semantics
// (the first decides; a later one refused is left out, with those after
// it) and handed to the writer lock's holder when another tally writer
// holds it (ledger.AppendHanded); through a remote all or none, as a
// request to its sequencer when it is one step the sequencer serves
// (sequenced).
func (c *Client) appendSteps(steps []handStep) ([]*ledger.Appended, error) {
	if err := c.needActor(); err != nil {
		return nil, err
	}
	local := c.Remote() == ""
	if !local && len(steps) == 1 {
		path, err := c.appendPath()
		if err != nil {
			return nil, err
		}
		st, fits, err := c.requestStep(steps[0])
		if err != nil {
			return nil, err
		}
		if fits && path.sequences(st.Op) {
			ap, err := c.request(st)
			if err == nil {
				return []*ledger.Appended{ap}, nil
			}
			if !path.offered || !errs.Is(err, errs.SequencerAbsent) {
				return nil, err
			}
			// The offer was stale: the server no longer sequences, and
			// refused the request before anything was appended
			// (SEQUENCER-ABSENT says so, ledger.Request), so the step goes
			// by compare-and-swap, once. The fetch drops the withdrawn
			// offer, and with it the next append's request.
			if _, err := c.L.FetchRemote(c.Remote()); err != nil {
				return nil, err
			}
		}
	}
	builds := make([]ledger.BuildFunc, len(steps))
	for i := range steps {
		steps[i].Nonce = ledger.NewNonce()
		b, err := steps[i].build(c.L, c.Actor, local)
		if err != nil {
			return nil, err
		}
		builds[i] = b
	}
	if !local {
		return c.appendBatch(builds)
	}
	return c.appendHanded(c.Actor, builds, steps)
}

// appendHanded appends builds, the builds of steps, as actor through
// ledger.AppendHanded, handing steps to the writer lock's holder.
func (c *Client) appendHanded(actor string, builds []ledger.BuildFunc, steps []handStep) ([]*ledger.Appended, error) {
	raw, err := json.Marshal(handIntent{V: handIntentVersion, Actor: actor, Now: chain.FormatTime(c.L.Now()), Steps: steps})
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "intent")
	}
	nonces := make([]string, len(steps))
	for i, st := range steps {
		nonces[i] = st.Nonce
	}
	return c.L.AppendHanded(actor, builds, ledger.Handed{Intent: raw, Nonces: nonces})
}

// decodeIntent is the ledger.IntentDecoder of every client (Open): the
// group of a handIntent, decoded strictly (an intent of another version, or
// with a member this version does not know, is not taken, and its writer
// appends it itself). A served request is taken only by a client that
// serves requests (SetRequestGuard), with the pusher its requester read.
func (c *Client) decodeIntent(l *ledger.Ledger, raw []byte) (*ledger.Group, error) {
	var in handIntent
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil || dec.More() {
		return nil, errs.New(errs.Usage, "the intent is not one intent object: %v", err)
	}
	if in.V != handIntentVersion || len(in.Steps) == 0 {
		return nil, errs.New(errs.Usage, "unsupported intent: version %d, %d steps", in.V, len(in.Steps))
	}
	clock, err := chain.ParseTime(in.Now)
	if err != nil {
		return nil, errs.New(errs.Usage, "intent time: %v", err)
	}
	g := &ledger.Group{Actor: in.Actor, Clock: clock}
	for _, st := range in.Steps {
		var b ledger.BuildFunc
		if st.Op == opServe && st.only() && len(in.Steps) == 1 {
			b, err = c.serveStep(st.Request, in.Actor)
		} else {
			b, err = st.build(l, in.Actor, true)
		}
		if err != nil {
			return nil, err
		}
		g.Builds = append(g.Builds, b)
	}
	return g, nil
}
