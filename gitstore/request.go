package gitstore

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"time"
)

// A request push sends one commit to a ref the server hands to its
// proc-receive hook (receive.procReceiveRefs), which acts on it and reports
// the ref it really moved (report-status v2, which the git CLI speaks).

// RequestResult is the server's answer to a request push.
type RequestResult struct {
	// OK is true when the server accepted the request; Reason is its
	// refusal otherwise.
	OK     bool
	Reason string
	// Ref is the ref the server reports it moved (the pushed ref when it
	// reported none), with the range Old..New printed for it ("" when
	// none: a new reference).
	Ref      string
	Old, New string
	// Said is what the server printed (its hooks' output), without the
	// "remote:" prefixes.
	Said string
	// Lines are the server's lines as it printed them (the "remote: "
	// prefix and git's trailing padding removed), also when the push
	// succeeded: the sequencer sends the entries' objects this way.
	Lines []string
}

// PushRequest pushes commit, whose objects pw holds, to ref on the remote
// and returns the server's answer for it. Over git:// tally sends pw's pack
// itself (pushRequestNative, where nativePushTarget allows) and stores
// nothing; otherwise the pack is stored for `git push --porcelain` to send,
// and removed after it (the request is the server's then). Either way a
// transport failure, or an answer without a status for the push, wraps
// ErrRemoteUnreachable (or ErrRemoteDenied): the request may or may not
// have been acted on.
//
// The push ends within deadline (the whole exchange, however the server
// trickles), and what the server says is kept up to MaxSaid bytes: a
// server past either is a transport failure (ErrRemoteUnreachable).
func (r *Repo) PushRequest(remote, ref string, pw *PackWriter, commit ObjectID, deadline time.Duration) (*RequestResult, error) {
	if host, addr, path, ok := r.nativePushTarget(remote); ok {
		// A connection dropped before the advertisement sent nothing: it
		// is made again (connlimit.go), within the request's deadline.
		end := time.Now().Add(deadline)
		var res *RequestResult
		err := retryDropped(min(deadline, connectRetryBudget), func(err error) bool { return errors.Is(err, errDropped) }, func() error {
			var err error
			res, err = pushRequestNative(host, addr, path, ref, commit, pw.Bytes(), end)
			return err
		})
		if !errors.Is(err, errNotNative) {
			return res, err
		}
	}
	pack, err := pw.WriteTo(r.ObjectDir)
	if err != nil {
		return nil, err
	}
	defer RemovePack(r.ObjectDir, pack)
	return r.pushRequestGit(remote, ref, commit, deadline)
}

// MaxSaid bounds what a client keeps of what the server says in answer to
// a request (its messages, band 2, and its report, band 1): the largest
// sent range (1 MiB of content, base64 in lines) with room to spare for
// other hooks' lines. A server that says more is cut off.
const MaxSaid = 4 << 20

// pushRequestGit pushes commit, stored, to ref with `git push --porcelain`.
func (r *Repo) pushRequestGit(remote, ref string, commit ObjectID, deadline time.Duration) (*RequestResult, error) {
	// core.abbrev=40: the porcelain range shows whole object names;
	// color.remote=false: git would colour keywords in what the server says.
	var stderr bytes.Buffer
	end := time.Now().Add(deadline)
	// A push sshd refused before its key exchange sent nothing: it is made
	// again, within the request's deadline (connlimit.go).
	var out []byte
	err := retryDropped(min(deadline, connectRetryBudget), unsentPush, func() error {
		stderr.Reset()
		bounds := GitRun{Progress: &stderr, Timeout: time.Until(end), MaxOutput: MaxSaid}
		var err error
		out, err = r.remoteGitCopying(remote, bounds, false, []string{"-c", "core.abbrev=40", "-c", "color.remote=false", "push", "--porcelain", "--no-verify", "--no-signed",
			"--no-follow-tags", "--no-recurse-submodules"}, commit.String()+":"+ref)
		return err
	})
	if res, ok := parsePorcelain(string(out), commit.String()); ok {
		var ge *GitError
		if errors.As(err, &ge) {
			res.Said, _ = splitStderr(ge.Stderr)
		}
		res.Lines = remoteLines(stderr.String())
		return res, nil
	}
	if err == nil {
		return nil, fmt.Errorf("%w: git push printed no status for %s", ErrRemoteUnreachable, ref)
	}
	return nil, remoteFailure(err, "")
}

// parsePorcelain reads the status line of the push of src from `git push
// --porcelain` output: "<flag>\t<src>:<dst>\t<summary>" where a rejection's
// summary is "[remote rejected] (<reason>)" and an update's "<old>..<new>"
// or "[new reference]".
func parsePorcelain(out, src string) (*RequestResult, bool) {
	pl, ok := porcelainFind(out, func(pl porcelainLine) bool { return pl.from == src })
	if !ok {
		return nil, false
	}
	res := &RequestResult{Ref: pl.to}
	if pl.flag == "!" {
		reason := pl.summary
		if i := strings.Index(reason, "("); i >= 0 && strings.HasSuffix(reason, ")") {
			reason = reason[i+1 : len(reason)-1]
		}
		res.Reason = reason
		return res, true
	}
	res.OK = true
	summary := pl.summary
	if fields := strings.Fields(summary); len(fields) > 0 {
		summary = fields[0]
	}
	if old, new, ok := strings.Cut(summary, ".."); ok {
		res.Old, res.New = old, strings.TrimPrefix(new, ".")
	}
	return res, true
}

// remoteLines are the server's lines in git's stderr s: those git prefixed
// with "remote: ", without the prefix and without the spaces git pads each
// with (its sideband demultiplexer's clear-to-end-of-line when stderr is
// not a terminal). A carriage return ends a line as a newline does: git's
// demultiplexer starts a new "remote: " line after either.
func remoteLines(s string) []string {
	var out []string
	for _, l := range strings.FieldsFunc(s, func(c rune) bool { return c == '\n' || c == '\r' }) {
		if rest, ok := strings.CutPrefix(l, "remote: "); ok {
			out = append(out, strings.TrimRight(rest, " "))
		}
	}
	return out
}
