package ledger

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
)

// Server sequencing (FORMAT.md §9b). Where the server runs tally's
// proc-receive hook, a client does not race for the ledger ref: it pushes an
// intent (a request, as canonical JSON) to a ref under RequestPrefix, and the
// server decides and appends the entry itself, under its writer lock, with
// the same append path and rules as any local append, and reports the
// ledger's old and new value in the push result. The client then fetches and
// verifies the ledger as always and reads its entry there. No client ever
// loses a compare-and-swap.

// RequestPrefix is the ref prefix of requests (receive.procReceiveRefs).
const RequestPrefix = "refs/for/tally"

// RequestRef is the ref a request of op is pushed to.
func RequestRef(op string) string { return RequestPrefix + "/" + op }

// MaxRequest bounds a request's commit (FORMAT.md §9b): an intent is a few
// hundred bytes, and the sequencer reads no request larger than this, by
// its header, before anything else of it.
const MaxRequest = 64 << 10

// MaxRefusalLine bounds the line that refuses a request in proc-receive's
// report, "ng <ref> <reason>": receive-pack makes it a line of its own
// report (with a newline), and each must fit in one pkt-line (65,516 bytes
// of payload), so a longer one is cut (CutRefusalLine) rather than lost.
const MaxRefusalLine = 65000

// CutRefusalLine is line cut to MaxRefusalLine bytes at a character
// boundary: the ref, the code and the message's start survive, and details
// cut short are read as part of the message (parseRequestRefusal finds no
// JSON object there).
func CutRefusalLine(line string) string {
	if len(line) <= MaxRefusalLine {
		return line
	}
	cut := MaxRefusalLine
	for cut > 0 && !utf8.RuneStart(line[cut]) {
		cut--
	}
	return line[:cut]
}

// RequestRefusalPrefix starts the reason of a request the server refused by
// tally's rules: "tally <CODE>: <message>", then, when the error has
// details, a space and their canonical JSON object.
const RequestRefusalPrefix = "tally "

// RequestRefusal is the reason the server gives for a request refused with
// err (FORMAT.md §9b), from which parseRequestRefusal gives back the same
// code, message and details (hooks.ProcReceive makes line breaks spaces: the
// reason is one pkt-line).
func RequestRefusal(err error) string {
	e := errs.From(err)
	reason := RequestRefusalPrefix + string(e.Code) + ": " + e.Message
	if len(e.Details) > 0 {
		if d, err := chain.MarshalCanonical(e.Details); err == nil {
			reason += " " + string(d)
		}
	}
	return reason
}

// parseRequestRefusal reads a RequestRefusal reason (ok false for any other
// reason). The details are the first " {" at which the rest of the message
// is one canonical JSON object; numbers keep their literal (json.Number).
func parseRequestRefusal(reason string) (*errs.Error, bool) {
	rest, ok := strings.CutPrefix(reason, RequestRefusalPrefix)
	if !ok {
		return nil, false
	}
	code, msg, ok := strings.Cut(rest, ": ")
	if !ok || !errs.Known(errs.Code(code)) {
		return nil, false
	}
	e := &errs.Error{Code: errs.Code(code), Message: msg}
	for i := 0; ; {
		j := strings.Index(msg[i:], " {")
		if j < 0 {
			return e, true
		}
		i += j + 1
		raw := []byte(msg[i:])
		var details map[string]any
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if canon, err := chain.Canonicalize(raw); err == nil && bytes.Equal(canon, raw) && dec.Decode(&details) == nil {
			e.Message, e.Details = msg[:i-1], details
			return e, true
		}
	}
}

// Request sends the intent intent(have, sent) (canonical JSON; have is
// this clone's verified tip of the remote ledger, zero if none, for the
// server to send the entries since, in range form sent or older) as op to the remote's sequencer and returns the
// entry the server appended for it, verified: taken from the range the
// server sent (takeSent) or else fetched. mine recognizes this request's
// entry: the reported one must be it, and when the answer was lost (the
// hook or the connection died after the append) it is looked for among
// those that landed since this clone's record of the remote: found, or
// reported REMOTE-UNREACHABLE, never sent twice. A refusal by the server's
// rules comes back with the rule's code; a server that does not sequence
// requests, which appended nothing, with SEQUENCER-ABSENT.
func (l *Ledger) Request(remote, op string, intent func(have gitstore.ObjectID, sent int) ([]byte, error), mine func(*Applied) bool) (*Appended, error) {
	known := l.readRemoteRecord(remote)
	res, request, pushErr := l.pushRequest(remote, op, intent, known, SentForm)
	if !known.IsZero() && pushErr == nil && !res.OK {
		// A server from before the have field, or before the sent one,
		// refused the request unread: nothing was applied, so the same
		// request without the field it does not know is a first.
		switch {
		case strings.Contains(res.Reason, haveUnknown):
			res, request, pushErr = l.pushRequest(remote, op, intent, gitstore.ObjectID{}, 1)
		case strings.Contains(res.Reason, sentUnknown):
			res, request, pushErr = l.pushRequest(remote, op, intent, known, 1)
		}
	}
	switch {
	case pushErr != nil && !errors.Is(pushErr, gitstore.ErrRemoteUnreachable):
		return nil, remoteError(pushErr)
	case pushErr == nil && !res.OK:
		if refused, ok := parseRequestRefusal(res.Reason); ok {
			return nil, refused // what the same claim refused here would say
		}
		if said, ok := hookRefusal(res.Lines, RequestRef(op), errs.SequencerAbsent); ok {
			// pre-receive refused the whole push: nothing was appended.
			return nil, sequencerAbsent(remote, said)
		}
		if strings.Contains(res.Reason, "hook declined") {
			// pre-receive refused it: nothing reached the sequencer.
			return nil, remoteError(fmt.Errorf("%w: %s", gitstore.ErrPushRejected, res.Said))
		}
		// Anything else (the sequencer died: "fail to run proc-receive
		// hook") leaves the outcome unknown: look for the entry.
		pushErr = fmt.Errorf("%w: the server answered %q", gitstore.ErrRemoteUnreachable, res.Reason)
	case pushErr == nil && res.Ref == RequestRef(op):
		// The server reported no ref of its own: one without tally's hooks
		// stores the request as a plain ref, and then nothing was
		// appended. That ref holding this very request (a new commit,
		// by its nonce) is what shows it, and deleting it on that
		// condition (a compare-and-swap push) both proves it and keeps
		// it from lingering or refusing the next request as a
		// non-fast-forward: a sequencer never creates a request ref. A
		// ref not deleted leaves the outcome unknown (a client git
		// without report-status v2 reports no refname even for a served
		// request): look for the entry.
		if err := l.Repo.PushRef(remote, res.Ref, request, gitstore.ObjectID{}); err != nil {
			pushErr = fmt.Errorf("%w: the server reported %s, and deleting the request stored there failed: %v", gitstore.ErrRemoteUnreachable, res.Ref, err)
			break
		}
		return nil, sequencerAbsent(remote, "it stored the request as the plain ref "+res.Ref+", deleted again")
	case pushErr == nil && res.Ref != l.Ref:
		// Another proc-receive hook (Gitea's AGit flow) took the request.
		return nil, errs.New(errs.Usage, "remote %s does not sequence requests: it answered for %s (unset git config %s here)",
			remote, res.Ref, SequencerConfig)
	}
	var old, new gitstore.ObjectID
	if pushErr == nil {
		// The server said which entry: its commit and the tip it was built on.
		var err1, err2 error
		old, err1 = gitstore.ParseObjectID(res.Old)
		new, err2 = gitstore.ParseObjectID(res.New)
		if err1 != nil || err2 != nil {
			return nil, errs.New(errs.RemoteRejected, "remote %s answered the request without the ledger's old and new value (%q..%q)", remote, res.Old, res.New)
		}
		if found := l.takeSent(remote, known, old, new, res.Lines); found != nil && mine(&found.Applied) {
			l.fastForwardLocal(new, new)
			l.maybePack() // the sent range is a pack, as a fetch's
			return found, nil
		}
	}
	fetched, err := l.FetchRemote(remote)
	if err != nil {
		return nil, err
	}
	tip := fetched
	var found *Appended
	from := known
	if pushErr == nil {
		if in, err := l.holdsCommit(fetched, new); err != nil || !in {
			return nil, errs.New(errs.RemoteRejected, "remote %s reported entry commit %s, which its ledger %s does not hold", remote, new, fetched)
		}
		from, tip = old, new
	}
	_, err = l.VerifyRangeEach(from, tip, func(a *Applied) error {
		if found == nil && mine(a) {
			found = &Appended{Applied: *a}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if found == nil {
		if pushErr == nil {
			pushErr = errors.New("the reported range holds no entry of this request")
		}
		return nil, errs.Wrap(errs.RemoteUnreachable, pushErr, "remote %s: the request's outcome is unknown and its entry is not in the ledger", remote)
	}
	if found.Commit, err = l.CommitAt(tip, found.Entry.Seq); err != nil {
		return nil, err
	}
	l.fastForwardLocal(fetched, fetched)
	// Every request fetches a pack and appends nothing here, so only this
	// keeps a sequenced clone's packs (and every later lookup) bounded.
	l.maybePack()
	return found, nil
}

// FindingLine is how tally's hooks print a verdict on ref (hooks.Finding):
// "tally: <kind> <ref>: <CODE>: <message>", kind "refused" or "warning".
// A client reads a refusal's code back from it (hookRefusal).
func FindingLine(kind, ref string, code errs.Code, message string) string {
	return "tally: " + kind + " " + ref + ": " + string(code) + ": " + message
}

// hookRefusal finds, among the server's lines, its pre-receive's refusal of
// ref with code (FindingLine) and returns the message.
func hookRefusal(lines []string, ref string, code errs.Code) (string, bool) {
	prefix := FindingLine("refused", ref, code, "")
	for _, line := range lines {
		if msg, ok := strings.CutPrefix(line, prefix); ok {
			return msg, true
		}
	}
	return "", false
}

// sequencerAbsent is the SEQUENCER-ABSENT refusal of a request remote did
// not sequence (said: how it answered), saying what to do. Nothing was
// appended for it: a client whose request the remote's offer chose claims
// by compare-and-swap instead.
func sequencerAbsent(remote, said string) error {
	return errs.New(errs.SequencerAbsent, "remote %s does not sequence requests (%s); set git config %s false to claim by compare-and-swap, or run tally hooks install --server on the server",
		remote, said, SequencerConfig)
}

// haveUnknown is what a server from before the have field answers a
// request that has it (its intent decoder refuses unknown members).
const haveUnknown = `unknown field "have"`

// sentUnknown is what a server from before the sent field (which sends
// range form 1 only) answers a request that has it.
const sentUnknown = `unknown field "sent"`

// pushRequest pushes the request intent(have, sent) as op, as a commit with
// the empty tree and the intent as its message, and returns the server's
// answer and the commit.
func (l *Ledger) pushRequest(remote, op string, intent func(have gitstore.ObjectID, sent int) ([]byte, error), have gitstore.ObjectID, sent int) (*gitstore.RequestResult, gitstore.ObjectID, error) {
	raw, err := intent(have, sent)
	if err != nil {
		return nil, gitstore.ObjectID{}, err
	}
	deadline, err := l.Repo.ConfigDuration(RequestTimeoutConfig, RequestTimeout)
	if err != nil || deadline <= 0 {
		return nil, gitstore.ObjectID{}, errs.New(errs.Usage, "%s: want a positive duration (%v)", RequestTimeoutConfig, err)
	}
	pw := gitstore.NewPackWriter()
	tree := pw.Add(gitstore.TreeObject, nil)
	who := gitstore.Ident{Name: "tally", Email: "tally", When: l.now().Unix(), TZ: "+0000"}
	id := pw.Add(gitstore.CommitObject, (&gitstore.Commit{Tree: tree, Author: who, Committer: who, Message: string(raw)}).Encode())
	res, err := l.Repo.PushRequest(remote, RequestRef(op), pw, id, deadline)
	return res, id, err
}

// NonceWindow is how many of the ledger's last entries a sequencer looks
// among for a request's nonce (FORMAT.md §9b): a request whose nonce one
// of them carries was answered already, and is refused. A request is
// answered within seconds of being sent, and the window is what the
// sequencer reads under the writer lock for each request, one entry blob
// per entry (BenchmarkAnsweredNonce: about 0.5 ms of CPU for the window).
const NonceWindow = 128

// AnsweredNonce reports whether one of the last NonceWindow entries of s
// carries nonce, and which: those of the ledger and those a batch being
// built on s holds before (two requests with one nonce in one batch: the
// second is the replay). The entries are read as stored (the snapshot is
// the ledger the server appends to), only one whose bytes hold the nonce
// decoded.
func (s *Snapshot) AnsweredNonce(nonce string) (uint64, bool, error) {
	mark := []byte(`"nonce":"` + nonce + `"`)
	for n := uint64(0); n < NonceWindow && n < s.Meta.Size; n++ {
		seq := s.Meta.Size - 1 - n
		_, loc, err := chain.EntryRecord(s, s.Meta.Size, seq)
		if err != nil {
			return 0, false, errs.Wrap(errs.Corrupt, err, "entry %d", seq)
		}
		raw, err := s.entryBlob(loc)
		if err != nil {
			return 0, false, errs.Wrap(errs.Corrupt, err, "entry %d blob %x", seq, loc)
		}
		if !bytes.Contains(raw, mark) {
			continue
		}
		if e, err := chain.Decode(raw); err == nil && e.Nonce == nonce {
			return seq, true, nil
		}
	}
	return 0, false, nil
}

// Signs reports whether this ledger's writer signs the entries it appends.
func (l *Ledger) Signs() bool { return l.signer != nil }

// RequestTimeoutConfig is the git configuration variable that bounds a
// request's push, the whole exchange with the server (a Go duration or
// whole seconds), RequestTimeout when unset: past it the outcome is
// unknown and the client looks for its entry as after a cut connection.
const RequestTimeoutConfig = "tally.requestTimeout"

// RequestTimeout is a request push's bound when RequestTimeoutConfig is
// not set: a request is served in milliseconds, or after the server's
// writer lock's own bound (30 s) at worst.
const RequestTimeout = 2 * time.Minute

// SequencerRef is the ref by which a server offers its sequencer (`tally
// hooks install --server` writes it, uninstall deletes it): fetched with
// the ledger into the clone's tracking refs, it turns sequencing on for
// a clone that does not choose (SequencerConfig unset). Only a server that
// serves intents of version 2 writes it.
const SequencerRef = "refs/tally/sequencer"

// OfferTrailer starts the last line of an offer's message, which lists
// the ops its sequencer serves, separated by spaces (FORMAT.md §9b). An
// offer without it (from a server before the list) serves claim-next.
const OfferTrailer = "Tally-Requests: "

// SequencerOffer is the message of the commit SequencerRef names on a
// server whose sequencer serves ops: its presence is the offer, the last
// line lists the ops, the rest is for whoever looks.
func SequencerOffer(ops []string) string {
	return "tally sequencer\n\nThis repository serves tally's sequenced requests (intent versions 1 and 2,\n" +
		"FORMAT.md section 9b). Clones fetch this ref with the ledger and send the listed\n" +
		"ops as requests unless git config tally.sequencer is false.\n\n" + OfferTrailer + strings.Join(ops, " ") + "\n"
}

// maxOffer bounds the offer's commit read: a server's text is a few
// hundred bytes, and whatever exceeds this lists nothing.
const maxOffer = 4 << 10

// OfferedOps are the ops the offer of remote's sequencer listed when this
// clone last fetched its ledger: nil when there was no offer, or it listed
// none (OfferTrailer).
func (l *Ledger) OfferedOps(remote string) []string {
	id, err := l.Repo.ReadRef(TrackingRef(remote, SequencerRef))
	if err != nil {
		return nil
	}
	db, err := l.Repo.Objects()
	if err != nil {
		return nil
	}
	c, err := db.ReadCommitAtMost(id, maxOffer)
	if err != nil {
		return nil
	}
	lines := strings.Split(strings.TrimSuffix(c.Message, "\n"), "\n")
	ops, ok := strings.CutPrefix(lines[len(lines)-1], OfferTrailer)
	if !ok {
		return nil
	}
	return strings.Fields(ops)
}

// OffersSequencer reports whether remote offered a sequencer when this
// clone last fetched its ledger (its SequencerRef, tracked).
func (l *Ledger) OffersSequencer(remote string) bool {
	_, err := l.Repo.ReadRef(TrackingRef(remote, SequencerRef))
	return err == nil
}

// Fetched reports whether this clone has fetched remote's ledger (its
// tracking ref is here).
func (l *Ledger) Fetched(remote string) bool {
	_, err := l.Repo.ReadRef(l.trackingRef(remote))
	return err == nil
}

// SequencerConfig is the git configuration variable of a clone that sends
// claim --next to the remote's sequencer instead of racing for the ref.
const SequencerConfig = "tally.sequencer"

// holdsCommit reports whether the ledger at tip has commit among its
// entries (tip itself or an ancestor at its own seq).
func (l *Ledger) holdsCommit(tip, commit gitstore.ObjectID) (bool, error) {
	snap, err := l.SnapshotAt(commit)
	if err != nil || snap.Meta.Size == 0 {
		return false, err
	}
	return l.holds(tip, snap.Meta.Size-1, snap.Meta.Head)
}

// CheckCommitLine checks that commit, which a checkpoint of size entries
// names in its commit line, is the ledger's commit of entry size-1 in the
// ledger at tip (FORK-DETECTED if not).
func (l *Ledger) CheckCommitLine(tip gitstore.ObjectID, size uint64, commit gitstore.ObjectID) error {
	at, err := l.CommitAt(tip, size-1)
	if err != nil {
		return err
	}
	if at != commit {
		return errs.New(errs.ForkDetected, "the ledger's commit of entry %d is %s, the checkpoint names %s", size-1, at, commit).
			With("checkpoint_size", size)
	}
	return nil
}

// CommitAt is the commit of entry seq (below the ledger's size) in the
// ledger at tip: the ledger has one commit per entry, so it is tip's
// (size-1-seq)-th first parent.
func (l *Ledger) CommitAt(tip gitstore.ObjectID, seq uint64) (gitstore.ObjectID, error) {
	db, err := l.Repo.Objects()
	if err != nil {
		return tip, err
	}
	snap, err := l.SnapshotAt(tip)
	if err != nil {
		return tip, err
	}
	id := tip
	for n := snap.Meta.Size - 1; n > seq; n-- {
		c, err := db.ReadCommit(id)
		if err != nil {
			return tip, l.historyShallow(errs.Wrap(errs.Corrupt, err, "ledger commit at seq %d", n))
		}
		if len(c.Parents) == 0 {
			return tip, errs.New(errs.Corrupt, "ledger commit %s: no parent at seq %d", id, n)
		}
		id = c.Parents[0]
	}
	return id, nil
}
