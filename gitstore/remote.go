package gitstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/format/pktline"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"golang.org/x/net/html"
)

// Remote transport goes through go-git, against any git server (file://,
// git://, http(s)://, ssh://). A push is a compare-and-swap: receive-pack
// applies each ref update only if the ref still holds the old value the
// client sent, atomically on the server. Error texts vary between servers,
// so callers decide what happened by listing the remote ref afterwards.

// ErrRemoteUnreachable wraps transport failures (connection, protocol).
var ErrRemoteUnreachable = errors.New("remote unreachable")

// ErrRemoteDenied wraps refusals of who is asking rather than of what was
// sent: authentication required or failed (HTTP 401), permission refused
// (HTTP 403, gitolite's "DENIED by", ssh's "Permission denied (publickey)"),
// a git daemon that does not serve the request ("service not enabled", its
// access hook's refusal, any ERR line it answers with) and a repository the
// server says is not there (servers answer so for repositories the user may
// not see). Retrying unchanged cannot help; the message carries what the
// server said, as plain text.
var ErrRemoteDenied = errors.New("remote denied access")

// ErrPushRejected wraps a push the server refused for a reason other than
// the ref having moved (for example its pre-receive hook); the message
// carries what the server said.
var ErrPushRejected = errors.New("push rejected by the remote")

// ErrNoRemote is returned for a remote name that is neither configured nor a
// URL or path.
var ErrNoRemote = errors.New("no such remote")

// remoteTimeout bounds one network operation.
const remoteTimeout = 60 * time.Second

// goRepo opens the repository with go-git (for its transports only).
func (r *Repo) goRepo() (*git.Repository, error) {
	st := filesystem.NewStorageWithOptions(osfs.New(r.CommonDir), cache.NewObjectLRUDefault(),
		filesystem.Options{AlternatesFS: osfs.New("/")})
	return git.Open(st, nil)
}

// RemoteURL returns the URL of a configured remote, or name itself when it
// looks like a URL or a path.
func (r *Repo) RemoteURL(name string) (string, error) {
	if url, ok := r.ConfigValue("remote." + name + ".url"); ok {
		return url, nil
	}
	if strings.Contains(name, "://") || strings.HasPrefix(name, "/") || strings.HasPrefix(name, ".") {
		return name, nil
	}
	return "", fmt.Errorf("%w: no remote named %q (git remote -v lists them)", ErrNoRemote, name)
}

func (r *Repo) goRemote(name string) (*git.Remote, error) {
	url, err := r.RemoteURL(name)
	if err != nil {
		return nil, err
	}
	repo, err := r.goRepo()
	if err != nil {
		return nil, err
	}
	rname := name
	if strings.ContainsAny(rname, "/:") {
		rname = "tally-url"
	}
	return git.NewRemote(repo.Storer, &config.RemoteConfig{Name: rname, URLs: []string{url}}), nil
}

// ListRemoteRef returns the value of ref on the remote (zero if absent).
func (r *Repo) ListRemoteRef(remote, ref string) (ObjectID, error) {
	rm, err := r.goRemote(remote)
	if err != nil {
		return ObjectID{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), remoteTimeout)
	defer cancel()
	refs, err := rm.ListContext(ctx, &git.ListOptions{})
	if err != nil {
		if errors.Is(err, transport.ErrEmptyRemoteRepository) {
			return ObjectID{}, nil
		}
		return ObjectID{}, remoteFailure(err, "")
	}
	for _, x := range refs {
		if x.Name().String() == ref {
			return ObjectID(x.Hash()), nil
		}
	}
	return ObjectID{}, nil
}

// RefPair names a remote ref and the local ref a fetch of it lands in.
type RefPair struct{ Ref, Tracking string }

// FetchRef fetches ref from the remote into the local ref tracking (which
// only tally writes) and returns its value (zero if the remote has none).
// The received pack is fsynced before FetchRef returns, so entries built on
// the fetched tip never reference objects that a crash could lose.
//
// The same fetch (one round trip) also brings each optional ref the remote
// has into its tracking ref. go-git fails a whole fetch for an exact ref the
// remote lacks, so an optional ref is asked for as the pattern "Ref*" (into
// "Tracking*"), which may match nothing: remote refs that merely start with
// Ref land beside its tracking ref, and are never read.
func (r *Repo) FetchRef(remote, ref, tracking string, optional ...RefPair) (ObjectID, error) {
	rm, err := r.goRemote(remote)
	if err != nil {
		return ObjectID{}, err
	}
	before := r.packNames()
	ctx, cancel := context.WithTimeout(context.Background(), remoteTimeout)
	defer cancel()
	specs := []config.RefSpec{config.RefSpec("+" + ref + ":" + tracking)}
	for _, o := range optional {
		specs = append(specs, config.RefSpec("+"+o.Ref+"*:"+o.Tracking+"*"))
	}
	err = rm.FetchContext(ctx, &git.FetchOptions{RefSpecs: specs, Tags: git.NoTags})
	switch {
	case err == nil, errors.Is(err, git.NoErrAlreadyUpToDate):
	case errors.Is(err, transport.ErrEmptyRemoteRepository), isNoMatchingRef(err):
		return ObjectID{}, nil
	default:
		return ObjectID{}, remoteFailure(err, "")
	}
	if err := r.syncNewPacks(before); err != nil {
		return ObjectID{}, err
	}
	id, err := r.ReadRef(tracking)
	if errors.Is(err, ErrNoRef) {
		return ObjectID{}, nil
	}
	return id, err
}

func isNoMatchingRef(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "couldn't find remote ref") || errors.Is(err, git.NoMatchingRefSpecError{}))
}

func (r *Repo) packNames() map[string]bool {
	out := map[string]bool{}
	names, _ := filepath.Glob(filepath.Join(r.ObjectDir, "pack", "*"))
	for _, n := range names {
		out[n] = true
	}
	return out
}

// syncNewPacks fsyncs the pack files written since before (go-git does not).
func (r *Repo) syncNewPacks(before map[string]bool) error {
	synced := false
	for n := range r.packNames() {
		if before[n] {
			continue
		}
		f, err := os.Open(n)
		if err != nil {
			continue
		}
		err = f.Sync()
		f.Close()
		if err != nil {
			return err
		}
		synced = true
	}
	if synced {
		return syncDir(filepath.Join(r.ObjectDir, "pack"))
	}
	return nil
}

// PushRef moves ref on the remote from old (zero: must not exist) to new,
// sending the objects new needs. The outcome of a failed push is not
// reported as won or lost: the caller lists the remote ref to decide. The
// returned error wraps ErrRemoteUnreachable for transport failures and
// ErrPushRejected when the server refused with a message (its hook output).
func (r *Repo) PushRef(remote, ref string, old, new ObjectID) error {
	rm, err := r.goRemote(remote)
	if err != nil {
		return err
	}
	var progress bytes.Buffer
	opts := &git.PushOptions{
		RemoteName: rm.Config().Name,
		RefSpecs:   []config.RefSpec{config.RefSpec(new.String() + ":" + ref)},
		Force:      true, // the compare-and-swap below is the guard, not fast-forward rules
		Progress:   &progress,
	}
	if !old.IsZero() {
		opts.RequireRemoteRefs = []config.RefSpec{config.RefSpec(old.String() + ":" + ref)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), remoteTimeout)
	defer cancel()
	err = rm.PushContext(ctx, opts)
	if err == nil {
		return nil
	}
	if errors.Is(err, git.NoErrAlreadyUpToDate) {
		// go-git also says this when it could not read the commit to push:
		// not a success; the caller's listing of the remote ref decides.
		return fmt.Errorf("%w: go-git reported nothing to push", ErrRemoteUnreachable)
	}
	if strings.Contains(err.Error(), "required to be") {
		// Nothing was sent: the remote ref moved before the push began.
		return &RefMovedError{Current: movedTo(err.Error())}
	}
	return remoteFailure(err, progress.String())
}

// remoteFailure is the one place a failed remote operation is classified,
// from go-git's error and what the server printed (progress; "" for fetches
// and listings): a denial of access (ErrRemoteDenied) first, then a refusal
// of the push by the server's hook or receive-pack's own checks
// (ErrPushRejected), reported with what the server printed; anything else,
// even a failure that printed text (an unpack error while the clone was
// being repacked), is transient (ErrRemoteUnreachable). Every message is
// plain text: an HTML error page is reduced to its words.
func remoteFailure(err error, progress string) error {
	text := plainText(err.Error())
	said := serverLines(plainText(progress))
	var errLine *pktline.ErrorLine
	switch {
	case errors.Is(err, transport.ErrAuthenticationRequired), errors.Is(err, transport.ErrAuthorizationFailed),
		errors.As(err, &errLine), deniedWords(text):
		return fmt.Errorf("%w: %s", ErrRemoteDenied, text)
	case errors.Is(err, transport.ErrRepositoryNotFound):
		return fmt.Errorf("%w: %s (or access to it denied)", ErrRemoteDenied, text)
	case deniedWords(said):
		return fmt.Errorf("%w: %s", ErrRemoteDenied, said)
	case strings.Contains(text, "hook declined") || strings.Contains(text, "rejected"):
		if said == "" {
			said = serverLines(text)
		}
		return fmt.Errorf("%w: %s", ErrPushRejected, said)
	}
	return fmt.Errorf("%w: %s", ErrRemoteUnreachable, text)
}

// deniedPhrases are what servers say when they refuse a user, in the words
// of gitolite (its "DENIED by <rule or fallthru>"), ssh, git daemon and the
// git CLI's HTTP transport. They are matched case-sensitively: tally's own
// refusals (PUSHER-DENIED, a hook's "permission denied" on a file) are the
// hook's verdict on the push, not a denial of access.
var deniedPhrases = []string{
	"DENIED by ",
	"Permission denied (",
	"service not enabled",
	"access denied or repository not exported",
	"Authentication failed",
	"The requested URL returned error: 401",
	"The requested URL returned error: 403",
}

func deniedWords(s string) bool {
	for _, p := range deniedPhrases {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

// plainText reduces s to plain words when it holds markup (an HTML error
// page in an HTTP response): the content of script and style elements and
// every tag go, entities are decoded and runs of white space become one
// space. Text without markup is returned as it is.
func plainText(s string) string {
	if !strings.Contains(s, "<") || !strings.Contains(s, ">") {
		return s
	}
	var b strings.Builder
	z := html.NewTokenizer(strings.NewReader(s))
	skip := 0
	for {
		switch z.Next() {
		case html.ErrorToken:
			return strings.Join(strings.Fields(b.String()), " ")
		case html.TextToken:
			if skip == 0 {
				b.Write(z.Text())
				b.WriteByte(' ')
			}
		case html.StartTagToken:
			if n, _ := z.TagName(); string(n) == "script" || string(n) == "style" {
				skip++
			}
			b.WriteByte(' ')
		case html.EndTagToken:
			if n, _ := z.TagName(); (string(n) == "script" || string(n) == "style") && skip > 0 {
				skip--
			}
			b.WriteByte(' ')
		}
	}
}

// RefMovedError reports a push not sent because the remote ref no longer held
// the expected value; Current is its value then (zero if absent or unknown).
type RefMovedError struct{ Current ObjectID }

func (e *RefMovedError) Error() string { return "remote ref moved to " + e.Current.String() }
func (e *RefMovedError) Unwrap() error { return ErrRefChanged }

// movedTo reads the current value from go-git's "required to be X but is Y".
func movedTo(msg string) ObjectID {
	_, after, ok := strings.Cut(msg, " but is ")
	if !ok {
		return ObjectID{}
	}
	id, _ := ParseObjectID(strings.TrimSpace(after))
	return id
}

// serverLines keeps what the server said, without progress noise.
func serverLines(s string) string {
	var out []string
	for _, l := range strings.Split(strings.ReplaceAll(s, "\r", "\n"), "\n") {
		l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "remote:"))
		if l != "" {
			out = append(out, l)
		}
	}
	return strings.Join(out, "; ")
}

// PushPack is PushRef for an update whose new objects are exactly those of
// one pack this process wrote (an append built on the remote tip): the pack
// file is sent as is, so go-git never opens the local object store or walks
// history to decide what to send. The outcome rules are PushRef's; a
// RefMovedError carries the remote value when nothing was sent.
func (r *Repo) PushPack(remote, ref string, old, new ObjectID, packName string) error {
	// Open the pack before anything else: a background compaction may merge
	// a fresh pack into another and remove it while the advertisement is on
	// the wire, and an open file outlives its name.
	f, err := os.Open(filepath.Join(r.ObjectDir, "pack", packName+".pack"))
	if err != nil {
		return err
	}
	defer f.Close() // go-git closes it only once it has sent it all
	url, err := r.RemoteURL(remote)
	if err != nil {
		return err
	}
	ep, err := transport.NewEndpoint(url)
	if err != nil {
		return err
	}
	cli, err := client.NewClient(ep)
	if err != nil {
		return remoteFailure(err, "")
	}
	ctx, cancel := context.WithTimeout(context.Background(), remoteTimeout)
	defer cancel()
	s, err := cli.NewReceivePackSession(ep, nil)
	if err != nil {
		return remoteFailure(err, "")
	}
	defer s.Close()
	ar, err := s.AdvertisedReferencesContext(ctx)
	if err != nil && !errors.Is(err, transport.ErrEmptyRemoteRepository) {
		return remoteFailure(err, "")
	}
	var cur ObjectID
	if ar != nil {
		if h, ok := ar.References[ref]; ok {
			cur = ObjectID(h)
		}
	}
	if cur != old {
		return &RefMovedError{Current: cur}
	}
	caps := capability.NewList() // an empty remote may advertise nothing at all
	if ar != nil {
		caps = ar.Capabilities
	}
	req := packp.NewReferenceUpdateRequestFromCapabilities(caps)
	var progress bytes.Buffer
	req.Progress = &progress
	if caps.Supports(capability.Sideband64k) {
		req.Capabilities.Set(capability.Sideband64k)
	} else if caps.Supports(capability.Sideband) {
		req.Capabilities.Set(capability.Sideband)
	}
	req.Commands = []*packp.Command{{Name: plumbing.ReferenceName(ref), Old: plumbing.Hash(old), New: plumbing.Hash(new)}}
	req.Packfile = f
	rs, err := s.ReceivePack(ctx, req)
	if err == nil && rs != nil {
		err = rs.Error()
		if err == nil && len(rs.CommandStatuses) == 0 {
			err = errors.New("the server sent no status for the update")
		}
	}
	if err == nil {
		return nil
	}
	return remoteFailure(err, progress.String())
}
