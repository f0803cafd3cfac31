package tally

import (
	"bytes"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/ledger"
	"github.com/tally-dev/tally/receipt"
)

// Server sequencing (FORMAT.md §9b): the client sends its intent, the
// server decides the entry where the state is and appends it itself through
// the same build as a local append of that op (one step's build, handStep)
// and the same append path: handed to the holder of the server's writer
// lock when another request holds it (group commit, ledger.AppendHanded),
// so requests that arrive together land as one batch.

// The ops a sequencer serves, each pushed to its request ref
// (ledger.RequestRef(op)): the appends agents repeat.
const (
	OpClaimNext = "claim-next" // claim --next
	OpDone      = "done"       // finish a cell with a receipt
	OpFail      = "fail"       // mark a cell failed
	OpRenew     = "renew"      // renew a cell's lease
	OpRelease   = "release"    // give a cell back
	OpLock      = "lock"       // lock path patterns, or renew locks held
	OpUnlock    = "unlock"     // release path locks
)

// SequencedOps are the ops this version serves, as its offer lists them
// (hooks.InstallSequencer).
var SequencedOps = []string{OpClaimNext, OpDone, OpFail, OpLock, OpRelease, OpRenew, OpUnlock}

// IntentVersion is the version of the intents this client sends: 2, whose
// answer is the entry carrying the intent's nonce. A server from before it
// refuses version 2 unread (USAGE), so no entry is ever taken by its holder
// fields alone.
const IntentVersion = 2

// Intent is a sequenced request, sent as its canonical JSON (RFC 8785) as
// the message of a commit with the empty tree: the op, and its step
// (NextClaim's members for claim-next, inline as version 1 had them; one
// member named after the op for the others), and Nonce, which makes every
// request a new commit. Have (optional) is the client's verified tip of the
// server's ledger: the server sends the entries after it with its answer
// (ledger.SendRange), sparing the client a fetch; Sent (optional, with
// Have) is the newest form of that range the client reads (absent: 1).
type Intent struct {
	V     int    `json:"v"`
	Op    string `json:"op"`
	Actor string `json:"actor"`
	*NextClaim
	Done *lease.DoneBody `json:"done,omitempty"` // the whole body, as the requester decided it (requestStep)
	repeatedSteps
	Have  string `json:"have,omitempty"`
	Sent  int    `json:"sent,omitempty"`
	Nonce string `json:"nonce"`
}

// step is the intent's step: the one member its op names, and no other
// (USAGE otherwise).
func (in *Intent) step() (handStep, error) {
	st := handStep{Op: in.Op, Nonce: in.Nonce, Claim: in.NextClaim, Done: in.Done, repeatedSteps: in.repeatedSteps}
	if !slices.Contains(SequencedOps, in.Op) || !st.only() {
		return st, errs.New(errs.Usage, "the request's op %q does not come with its step alone (this server serves %s)", in.Op, strings.Join(SequencedOps, ", "))
	}
	return st, nil
}

// NextClaim is a claim of the next ready cell as an intent carries it (a
// sequenced request, a step handed to the writer lock's holder): the wave
// it is taken from (empty: any), its TTL (0: lease.TTLDefault), and what
// the claim records about the requesting process (Holder) and its code
// base (Base).
type NextClaim struct {
	Wave   string       `json:"wave,omitempty"`
	TTL    int          `json:"ttl"`
	Holder IntentHolder `json:"holder"`
	Base   string       `json:"base,omitempty"`
}

// nextClaim is the NextClaim of o (a plain claim of the next ready cell)
// by the process self, on the code base base.
func nextClaim(o ClaimOptions, self lease.HolderID, base string) NextClaim {
	return NextClaim{Wave: o.NextWave, TTL: o.TTL, Base: base,
		Holder: IntentHolder{Host: self.Host, PID: self.PID, BootID: self.BootID, PIDNS: self.PIDNS, PIDStart: self.PIDStart}}
}

// build is the build of n (claimBuild), wherever it is appended.
func (n NextClaim) build() ledger.BuildFunc {
	o := ClaimOptions{Next: true, NextWave: n.Wave, TTL: n.TTL}
	if o.TTL == 0 {
		o.TTL = lease.TTLDefault
	}
	return claimBuild(o, lease.ModeClaim, n.Holder.id(), n.Base)
}

// IntentHolder is lease.HolderID as an intent carries it, with the claim
// body's field names.
type IntentHolder struct {
	Host     string `json:"host"`
	PID      int    `json:"pid"`
	BootID   string `json:"boot_id,omitempty"`
	PIDNS    uint64 `json:"pid_ns,omitempty"`
	PIDStart uint64 `json:"pid_start,omitempty"`
}

func (h IntentHolder) id() lease.HolderID {
	return lease.HolderID{Host: h.Host, PID: h.PID, BootID: h.BootID, PIDNS: h.PIDNS, PIDStart: h.PIDStart}
}

// appendPath is ClaimPath, found out first where it is not known: a
// clone's first append fetches, which tells whether the remote offers a
// sequencer, so even that append can use it.
func (c *Client) appendPath() (ClaimPath, error) {
	path := c.ClaimPath()
	if path.unknown {
		if _, err := c.L.FetchRemote(c.Remote()); err != nil {
			return path, err
		}
		path = c.ClaimPath()
	}
	return path, nil
}

// sequences reports whether op goes to the remote's sequencer on path.
func (p ClaimPath) sequences(op string) bool {
	return p.Path == PathSequenced && slices.Contains(p.Ops, op)
}

// request appends the step st through the remote's sequencer, as the
// client's actor. Its entry is the one carrying the request's nonce, which
// the server gives the entry it appends for it (the reported entry must be
// it; when the server's answer is lost, it is looked for), by this actor,
// of st's kind (made). The nonce, fresh for each request, tells two
// requests of one process apart, and an old grant from one not yet
// answered.
func (c *Client) request(st handStep) (*ledger.Appended, error) {
	st.Nonce = ledger.NewNonce()
	in := c.intentOf(st)
	intent := func(have gitstore.ObjectID, sent int) ([]byte, error) {
		in.Have, in.Sent = "", 0
		if !have.IsZero() {
			in.Have = have.String()
			if sent > 1 {
				in.Sent = sent
			}
		}
		return chain.MarshalCanonical(in)
	}
	mine := func(a *ledger.Applied) bool {
		return a.Entry.Nonce == in.Nonce && a.Entry.Actor == c.Actor && st.made(a)
	}
	return c.L.Request(c.Remote(), st.Op, intent, mine)
}

// intentOf is the intent of a request of the step st by the client's
// actor, without a have or range form.
func (c *Client) intentOf(st handStep) Intent {
	return Intent{V: IntentVersion, Op: st.Op, Actor: c.Actor, NextClaim: st.Claim, Done: st.Done, repeatedSteps: st.repeatedSteps, Nonce: st.Nonce}
}

// made reports whether a is an entry st's build makes: of its kind, with
// the effect the callers read (a lease granted, a lock granted), and for a
// claim of the next ready cell, one recording st's holder.
func (st *handStep) made(a *ledger.Applied) bool {
	if a.Entry.Kind != st.kind() {
		return false
	}
	switch st.Op {
	case OpClaimNext:
		b, ok := claimOf(a)
		_, granted := a.Result.Effect.(*lease.Granted)
		return ok && granted && b.Next && b.Holder() == st.Claim.Holder.id()
	case OpRenew:
		_, granted := a.Result.Effect.(*lease.Granted)
		return granted
	case OpLock:
		_, granted := a.Result.Effect.(*lease.LockGrant)
		return granted
	case OpDone:
		_, receipt := a.Result.Effect.(*lease.ReceiptRef)
		return receipt
	}
	return true
}

// requestStep is st as a request carries it, and whether its request fits
// in ledger.MaxRequest (else it goes by compare-and-swap). A receipt's
// body is decided here, whole, on this clone's verified view of the
// remote's ledger (the lease's base, the paths changed since it): the
// server holds the commits a receipt names only if the agent pushed them,
// and takes the body as it takes a pushed entry's, judged by the rules.
// Every other step goes as it is.
func (c *Client) requestStep(st handStep) (handStep, bool, error) {
	if st.Op == OpDone {
		s, ok, err := c.L.KnownRemote(c.Remote())
		if err == nil && !ok {
			s, err = c.head()
		}
		if err != nil {
			return st, false, err
		}
		prep, err := receipt.Resume(c.L, *st.Done)
		if err != nil {
			return st, false, err
		}
		if st.Done, err = prep.Body(s); err != nil {
			return st, false, err
		}
	}
	// The intent as sent at its longest: with a have, a range form and the
	// nonce.
	in := c.intentOf(st)
	in.Have, in.Sent, in.Nonce = strings.Repeat("0", 40), 99, strings.Repeat("0", 32)
	raw, err := chain.MarshalCanonical(in)
	return st, err == nil && len(raw)+commitOverhead <= ledger.MaxRequest, err
}

// commitOverhead bounds what a request's commit adds to its intent: the
// tree, author and committer lines and the object's header.
const commitOverhead = 256

// kind is the kind of the entry st appends (none for a served request:
// its intent's step says).
func (st *handStep) kind() chain.Kind {
	return map[string]chain.Kind{OpDone: chain.KindDone, OpFail: chain.KindFail, OpClaimNext: chain.KindClaim, OpRenew: chain.KindRenew,
		OpRelease: chain.KindRelease, OpLock: chain.KindLock, OpUnlock: chain.KindUnlock}[st.Op]
}

// claimOf is the claim body of an applied entry (ok false for other kinds).
func claimOf(a *ledger.Applied) (*lease.ClaimBody, bool) {
	if a.Entry.Kind != chain.KindClaim {
		return nil, false
	}
	var b lease.ClaimBody
	return &b, json.Unmarshal(a.Entry.Body, &b) == nil
}

// Guard judges, before an entry of actor and kind is built on s, whether
// the request may append it (the server's pusher binding).
type Guard func(s *ledger.Snapshot, actor string, kind chain.Kind) error

// RequestGuard is the Guard of a request whose pusher the server named by
// the variables pusher holds (name to value): what a request is judged
// by, in whichever server process its entry is built.
type RequestGuard func(pusher map[string]string) Guard

// SetRequestGuard makes this client serve requests (ServeRequest), each
// judged by guard. A client without one takes no request another server
// process hands it: that process appends it itself.
func (c *Client) SetRequestGuard(guard RequestGuard) { c.requestGuard = guard }

// servedRequest is a request as the server process that read it hands it
// to the holder of the ledger's writer lock (a step of op opServe): its op,
// its intent as pushed, and the variables that name its pusher there.
type servedRequest struct {
	Op     string            `json:"op"`
	Intent string            `json:"intent"`
	Pusher map[string]string `json:"pusher,omitempty"`
}

// ServeRequest is the server's side of a request of op: it reads the
// intent (parseIntent), and appends its entry to this (the server's) ledger
// as the intent's actor, built by the same build as a local one of its op
// (handStep.build), carrying the intent's nonce, with the guard of pusher
// checked on the very snapshot the entry is built on (serveBuild). It goes
// the same append path as a local one: handed to the writer lock's holder
// when another request holds it, so that requests that arrive together
// land as one batch. Then it writes to sent the range after the intent's
// have up to the new entry, in the form the intent reads
// (ledger.SendRange; nothing for a have this ledger does not lead from).
//
// It never signs for a requester: a server whose ledger signs what it
// appends (a signing key from any source), or whose policy requires
// signatures, refuses every request (SEQUENCER-SIGNS), and a request whose
// nonce one of the ledger's last ledger.NonceWindow entries carries was
// answered already (REQUEST-REPLAYED).
func (c *Client) ServeRequest(op string, raw []byte, pusher map[string]string, sent io.Writer) (*ledger.Appended, error) {
	if err := c.ServesRequests(); err != nil {
		return nil, err
	}
	req := &servedRequest{Op: op, Intent: string(raw), Pusher: pusher}
	in, build, err := c.serveBuild(req)
	if err != nil {
		return nil, err
	}
	out, err := c.appendHanded(in.Actor, []ledger.BuildFunc{build}, []handStep{{Op: opServe, Nonce: in.Nonce, Request: req}})
	if err != nil {
		return nil, err
	}
	// The entry has landed: a range that cannot be sent only costs the
	// client its fetch.
	have, _ := gitstore.ParseObjectID(in.Have)                // checked by parseIntent; zero when absent
	c.L.SendRange(sent, have, out[0].Commit, max(in.Sent, 1)) // SendRange sends the newest form it knows up to it
	return out[0], nil
}

// serveStep is the build of the served request req, handed by another
// server process for actor: its intent's actor.
func (c *Client) serveStep(req *servedRequest, actor string) (ledger.BuildFunc, error) {
	in, build, err := c.serveBuild(req)
	if err == nil && in.Actor != actor {
		err = errs.New(errs.Usage, "a served request of actor %q handed as %q", in.Actor, actor)
	}
	return build, err
}

// serveBuild reads req's intent and returns it and the build of its entry:
// its step's build (handStep.build), preceded, on the snapshot the entry is
// built on, by the checks only a server makes: a policy that requires
// signatures (SEQUENCER-SIGNS), the pusher binding (the guard of req's
// pusher, for the intent's actor and its entry's kind), and the nonce
// (REQUEST-REPLAYED).
func (c *Client) serveBuild(req *servedRequest) (*Intent, ledger.BuildFunc, error) {
	if c.requestGuard == nil {
		return nil, nil, errs.New(errs.Internal, "this process does not serve requests")
	}
	in, err := parseIntent(req.Op, []byte(req.Intent))
	if err != nil {
		return nil, nil, err
	}
	st, err := in.step()
	if err != nil {
		return nil, nil, err
	}
	var build ledger.BuildFunc
	if st.Op == OpDone {
		// The body as the requester decided it (requestStep), taken as a
		// pushed entry's: the rules judge it.
		build = withNonce(static(chain.KindDone, st.Done), st.Nonce)
	} else if build, err = st.build(c.L, in.Actor, false); err != nil {
		return nil, nil, err
	}
	guard := c.requestGuard(req.Pusher)
	return in, func(s *ledger.Snapshot, now time.Time) (*ledger.Draft, error) {
		if err := unsignedPolicy(s); err != nil {
			return nil, err
		}
		if err := guard(s, in.Actor, st.kind()); err != nil {
			return nil, err
		}
		if seq, seen, err := s.AnsweredNonce(in.Nonce); err != nil || seen {
			if err == nil {
				err = errs.New(errs.RequestReplayed, "entry %d already answers a request with nonce %s", seq, in.Nonce).With("seq", seq)
			}
			return nil, err
		}
		return build(s, now)
	}, nil
}

// parseIntent reads the intent of a request pushed as op: canonical JSON
// of an Intent of version 1 or 2 (1 for claim-next only) whose op is op,
// with no member it does not know, its nonce 32 lowercase hex digits, its
// have (if any) 40, its sent (if any) a range form above 1 beside a have;
// USAGE otherwise.
func parseIntent(op string, raw []byte) (*Intent, error) {
	canon, err := chain.Canonicalize(raw)
	if err != nil || !bytes.Equal(canon, raw) {
		return nil, errs.New(errs.Usage, "the request is not canonical JSON")
	}
	var in Intent
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return nil, errs.New(errs.Usage, "the request is not an intent: %v", err)
	}
	if (in.V != IntentVersion && (in.V != 1 || op != OpClaimNext)) || in.Op != op || !slices.Contains(SequencedOps, op) {
		return nil, errs.New(errs.Usage, "unsupported request: version %d, op %q pushed as %q (this server serves %s, version %d, and version 1 of %s)",
			in.V, in.Op, op, strings.Join(SequencedOps, ", "), IntentVersion, OpClaimNext)
	}
	if !chain.IsLowerHex(in.Nonce, 32) {
		return nil, errs.New(errs.Usage, "the request's nonce %q is not 32 lowercase hex digits", in.Nonce)
	}
	if in.Have != "" {
		if have, err := gitstore.ParseObjectID(in.Have); err != nil || have.String() != in.Have || have.IsZero() {
			return nil, errs.New(errs.Usage, "the request's have %q is not 40 lowercase hex digits", in.Have)
		}
	}
	if in.Sent != 0 && (in.Have == "" || in.Sent < 2) {
		return nil, errs.New(errs.Usage, "the request's sent %d is not a range form above 1 beside a have", in.Sent)
	}
	return &in, nil
}

// ServesRequests refuses to serve requests where this server's ledger
// signs what it appends: an entry the server appends for a requester
// would carry the server's signature as the requester's actor.
func (c *Client) ServesRequests() error {
	if c.L.Signs() {
		return errs.New(errs.SequencerSigns, "this server signs the entries it appends (a signing key: TALLY_SIGNING_KEY, --sign-key, or git config gpg.format=ssh with user.signingkey), and never signs for a requester; clients use compare-and-swap")
	}
	return nil
}

// unsignedPolicy refuses to serve requests on a ledger whose policy
// requires signatures: only the actor can sign its entry.
func unsignedPolicy(s *ledger.Snapshot) error {
	p, err := lease.ReadPolicy(s)
	if err != nil {
		return err
	}
	if p.RequireSignatures {
		return errs.New(errs.SequencerSigns, "the ledger's policy requires signatures, which only the actor can make; clients use compare-and-swap")
	}
	return nil
}
