package tally

import (
	"bytes"
	"encoding/json"
	"io"
	"time"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/ledger"
)

// Server sequencing of claim --next (FORMAT.md §9b): the client sends its
// intent, the server decides the cell where the state is and appends the
// claim itself through the same build (claimBuild) and the same append path
// as a local claim.

// OpClaimNext is the request op of claim --next (its ref is
// ledger.RequestRef(OpClaimNext)).
const OpClaimNext = "claim-next"

// IntentVersion is the version of the intents this client sends: 2, whose
// answer is the entry carrying the intent's nonce. A server from before it
// refuses version 2 unread (USAGE), so no entry is ever taken by its holder
// fields alone.
const IntentVersion = 2

// Intent is a sequenced request, sent as its canonical JSON (RFC 8785) as
// the message of a commit with the empty tree: the claim (NextClaim's
// members), and Nonce, which makes every request a new commit. Have
// (optional) is the client's verified tip of the server's ledger: the
// server sends the entries after it with its answer (ledger.SendRange),
// sparing the client a fetch; Sent (optional, with Have) is the newest form
// of that range the client reads (absent: 1).
type Intent struct {
	V     int    `json:"v"`
	Op    string `json:"op"`
	Actor string `json:"actor"`
	NextClaim
	Have  string `json:"have,omitempty"`
	Sent  int    `json:"sent,omitempty"`
	Nonce string `json:"nonce"`
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

// claimRequest is Claim of the next ready cell n through the remote's
// sequencer.
func (c *Client) claimRequest(n NextClaim) (*LeaseResult, error) {
	if c.Actor == "" {
		return nil, errs.New(errs.Usage, "no actor: pass --actor, set TALLY_ACTOR or git config user.email")
	}
	self := n.Holder.id()
	in := Intent{V: IntentVersion, Op: OpClaimNext, Actor: c.Actor, NextClaim: n, Nonce: ledger.NewNonce()}
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
	// This request's entry: the one carrying its nonce, which the server
	// gives the entry it appends for it (the reported entry must be it;
	// when the server's answer is lost, it is looked for), and which is this
	// actor's claim --next recording this very process as its holder. The
	// nonce, fresh for each request, tells two requests of one process
	// apart, and an old grant from one not yet answered.
	mine := func(a *ledger.Applied) bool {
		b, ok := claimOf(a)
		return ok && a.Entry.Nonce == in.Nonce && a.Entry.Actor == c.Actor && b.Next && b.Holder() == self
	}
	ap, err := c.L.Request(c.Remote(), OpClaimNext, intent, mine)
	if err != nil {
		return nil, err
	}
	_, ok := claimOf(&ap.Applied)
	_, isGrant := ap.Result.Effect.(*lease.Granted)
	if !ok || !isGrant || ap.Entry.Actor != c.Actor {
		return nil, errs.New(errs.RemoteRejected, "remote %s answered the request with entry %d, which is not a claim granted to %s", c.Remote(), ap.Entry.Seq, c.Actor)
	}
	return leaseResult(ap), nil
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

// ServeRequest is the server's side of a request of op: it reads the
// intent (canonical JSON of an Intent, else USAGE), and appends its entry to
// this (the server's) ledger as the intent's actor, built by the same build
// and appended by the same path as a local one, carrying the intent's
// nonce, with guard checked on the very snapshot the entry is built on.
// Then it writes to sent the range after the intent's have up to the new
// entry, in the form the intent reads (ledger.SendRange; nothing for a have
// this ledger does not lead from).
//
// It never signs for a requester: a server whose ledger signs what it
// appends (a signing key from any source), or whose policy requires
// signatures, refuses every request (SEQUENCER-SIGNS), and a request whose
// nonce one of the ledger's last ledger.NonceWindow entries carries was
// answered already (REQUEST-REPLAYED).
func (c *Client) ServeRequest(op string, raw []byte, guard Guard, sent io.Writer) (*ledger.Appended, error) {
	if err := c.ServesRequests(); err != nil {
		return nil, err
	}
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
	if (in.V != 1 && in.V != IntentVersion) || in.Op != op || op != OpClaimNext {
		return nil, errs.New(errs.Usage, "unsupported request: version %d, op %q pushed as %q (this server serves %s, versions 1 and %d)", in.V, in.Op, op, OpClaimNext, IntentVersion)
	}
	if !chain.IsLowerHex(in.Nonce, 32) {
		return nil, errs.New(errs.Usage, "the request's nonce %q is not 32 lowercase hex digits", in.Nonce)
	}
	var have gitstore.ObjectID
	if in.Have != "" {
		if have, err = gitstore.ParseObjectID(in.Have); err != nil || have.String() != in.Have || have.IsZero() {
			return nil, errs.New(errs.Usage, "the request's have %q is not 40 lowercase hex digits", in.Have)
		}
	}
	form := 1
	switch {
	case in.Sent != 0 && (in.Have == "" || in.Sent < 2):
		return nil, errs.New(errs.Usage, "the request's sent %d is not a range form above 1 beside a have", in.Sent)
	case in.Sent != 0:
		form = in.Sent // SendRange sends the newest it knows up to it
	}
	build := in.NextClaim.build()
	out, err := c.L.AppendBatch(in.Actor, []ledger.BuildFunc{func(s *ledger.Snapshot, now time.Time) (*ledger.Draft, error) {
		if err := unsignedPolicy(s); err != nil {
			return nil, err
		}
		if err := guard(s, in.Actor, "claim"); err != nil {
			return nil, err
		}
		if seq, seen, err := s.AnsweredNonce(in.Nonce); err != nil || seen {
			if err == nil {
				err = errs.New(errs.RequestReplayed, "entry %d already answers a request with nonce %s", seq, in.Nonce).With("seq", seq)
			}
			return nil, err
		}
		d, err := build(s, now)
		if err != nil {
			return nil, err
		}
		d.Nonce = in.Nonce // the requester accepts only the entry carrying it
		return d, nil
	}})
	if err != nil {
		return nil, err
	}
	// The entry has landed: a range that cannot be sent only costs the
	// client its fetch.
	c.L.SendRange(sent, have, out[0].Commit, form)
	return out[0], nil
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
