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

// The intents of group commit (FORMAT.md §9, "Group commit"): a done, a
// done with the next claim, and a claim of the next ready cell are
// appended through appendSteps, as steps. The same steps become the
// entries whether this process appends them or hands them, as an intent,
// to the writer lock's holder, which decodes them with decodeIntent: one
// encoding and one way to build them, for every command and the MCP tools.

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

// opDone is the op of a receipt's step.
const opDone = "done"

// handStep is one entry of an intent: Op opDone, a receipt (Done: the body
// as receipt.Prepared.Draft gives it, its base and changed paths decided
// on the state it lands on), or OpClaimNext, a claim of the next ready
// cell (Claim). Nonce is the entry's nonce, by which its writer finds it if
// the holder dies before answering.
type handStep struct {
	Op    string          `json:"op"`
	Nonce string          `json:"nonce"`
	Done  *lease.DoneBody `json:"done,omitempty"`
	Claim *NextClaim      `json:"claim,omitempty"`
}

// build is the build of st on l's repository (beside, for a local ledger:
// a receipt's note goes with its entry), carrying st's nonce.
func (st handStep) build(l *ledger.Ledger, beside bool) (ledger.BuildFunc, error) {
	if !chain.IsLowerHex(st.Nonce, 32) {
		return nil, errs.New(errs.Usage, "intent step: nonce %q is not 32 lowercase hex digits", st.Nonce)
	}
	var b ledger.BuildFunc
	switch {
	case st.Op == opDone && st.Done != nil && st.Claim == nil:
		prep, err := receipt.Resume(l, *st.Done)
		if err != nil {
			return nil, err
		}
		b = receiptBuild(l, prep, beside)
	case st.Op == OpClaimNext && st.Claim != nil && st.Done == nil:
		b = st.Claim.build()
	default:
		return nil, errs.New(errs.Usage, "intent step: op %q with done %v and claim %v", st.Op, st.Done != nil, st.Claim != nil)
	}
	return func(s *ledger.Snapshot, now time.Time) (*ledger.Draft, error) {
		d, err := b(s, now)
		if d != nil {
			d.Nonce = st.Nonce
		}
		return d, err
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
// holds it (ledger.AppendHanded); through a remote all or none.
func (c *Client) appendSteps(steps []handStep) ([]*ledger.Appended, error) {
	if err := c.needActor(); err != nil {
		return nil, err
	}
	local := c.Remote() == ""
	builds := make([]ledger.BuildFunc, len(steps))
	nonces := make([]string, len(steps))
	for i := range steps {
		steps[i].Nonce = ledger.NewNonce()
		nonces[i] = steps[i].Nonce
		b, err := steps[i].build(c.L, local)
		if err != nil {
			return nil, err
		}
		builds[i] = b
	}
	if !local {
		return c.appendBatch(builds)
	}
	raw, err := json.Marshal(handIntent{V: handIntentVersion, Actor: c.Actor, Now: chain.FormatTime(c.L.Now()), Steps: steps})
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "intent")
	}
	return c.L.AppendHanded(c.Actor, builds, ledger.Handed{Intent: raw, Nonces: nonces})
}

// decodeIntent is the ledger.IntentDecoder of every client (Open): the
// group of a handIntent, decoded strictly (an intent of another version, or
// with a member this version does not know, is not taken, and its writer
// appends it itself).
func decodeIntent(l *ledger.Ledger, raw []byte) (*ledger.Group, error) {
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
		b, err := st.build(l, true)
		if err != nil {
			return nil, err
		}
		g.Builds = append(g.Builds, b)
	}
	return g, nil
}
