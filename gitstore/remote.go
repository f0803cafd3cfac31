package gitstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Remote transport is the git CLI's: `git ls-remote`, `git fetch` and `git
// push` run with the user's configuration, so tally reaches every remote
// `git fetch` and `git push` reach, the way they reach it: ssh through
// GIT_SSH_COMMAND, core.sshCommand and ~/.ssh/config, HTTP(S) credentials
// through credential helpers, http.extraHeader, url.<base>.insteadOf,
// proxies. A push is a compare-and-swap (--force-with-lease with the
// expected old value): git sends "old new ref", and receive-pack applies the
// update only if the ref still holds old, atomically in its ref transaction.
// git never prompts (remoteEnv), and what happened is decided from git's
// porcelain report and stderr in one place (remoteFailure).

// ErrRemoteUnreachable wraps transport failures (connection, protocol).
var ErrRemoteUnreachable = errors.New("remote unreachable")

// ErrRemoteDenied wraps refusals of who is asking rather than of what was
// sent: authentication required or failed (HTTP 401, credentials git could
// not get without a prompt), permission refused (HTTP 403, gitolite's
// "DENIED by", ssh's "Permission denied (publickey)", an unknown ssh host
// key), a git daemon that does not serve the request ("service not
// enabled", its access hook's refusal, any ERR line it answers with, which
// git prints as "remote error: …") and a repository the server says is not
// there (servers answer so for repositories the user may not see). Retrying
// unchanged cannot help; the message carries what the server said, as plain
// text.
var ErrRemoteDenied = errors.New("remote denied access")

// ErrPushRejected wraps a push the server refused for a reason other than
// the ref having moved (for example its pre-receive hook); the message
// carries what the server said.
var ErrPushRejected = errors.New("push rejected by the remote")

// ErrNoRemote is returned for a remote name that is neither configured nor a
// URL or path.
var ErrNoRemote = errors.New("no such remote")

// remoteIdle bounds how long one network operation may go without a word
// from git (GitRun.Idle). Fetches, and pushes whose progress is asked for
// (sync's), run with --progress, so git reports as long as data moves,
// however long a big transfer takes. A claim's or a note's push sends a few
// objects and stays quiet: --progress costs it about a tenth of its time.
const remoteIdle = 60 * time.Second

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

// remoteGit runs one network command of the git CLI against remote (a
// configured remote's name, or a URL or path) in the repository, with
// remoteEnv; args go before the remote, rest after it.
func (r *Repo) remoteGit(remote string, args []string, rest ...string) ([]byte, error) {
	return r.remoteGitShowing(remote, nil, args, rest...)
}

// remoteGitShowing is remoteGit copying git's stderr to progress as it
// comes (GitRun.Progress), when progress is not nil.
func (r *Repo) remoteGitShowing(remote string, progress io.Writer, args []string, rest ...string) ([]byte, error) {
	return r.remoteGitCopying(remote, GitRun{Progress: progress}, progress != nil, args, rest...)
}

// remoteGitCopying is remoteGit run as bounds says: copying git's stderr
// to bounds.Progress as it comes (nil: not copied), within its Timeout and
// MaxOutput (none when zero); asking git for progress reports when
// progress (always for a fetch).
func (r *Repo) remoteGitCopying(remote string, bounds GitRun, progress bool, args []string, rest ...string) ([]byte, error) {
	if _, err := r.RemoteURL(remote); err != nil {
		return nil, err
	}
	argv := args[:len(args):len(args)]
	if slices.Contains(argv, "fetch") || progress {
		argv = append(argv, "--progress")
	}
	argv = append(append(argv, "--", remote), rest...)
	bounds.Dir, bounds.Args, bounds.Env, bounds.Idle = r.gitRunDir(), argv, r.remoteEnv(), remoteIdle
	out, err := bounds.Run()
	var ge *GitError
	if errors.As(err, &ge) && strings.Contains(ge.Stderr, "The requested URL returned error: ") {
		service := "git-upload-pack"
		if slices.Contains(args, "push") {
			service = "git-receive-pack"
		}
		if page := r.httpErrorPage(remote, service); page != "" {
			ge.Stderr = "remote: " + page + "\n" + ge.Stderr
		}
	}
	return out, err
}

// httpErrorPage asks an HTTP(S) remote once more, for service's ref
// advertisement, and returns the body of the error it answers, as plain
// text ("" when it answers no error, or says it as text/plain, which git
// has shown already). git shows an error's body only when it is text/plain,
// and a web server's HTML error page is often where it says why. The URL is
// git's (insteadOf applied), the credentials those in it or git's
// credential helpers'. The page is for the message, never for a decision.
func (r *Repo) httpErrorPage(remote, service string) string {
	out, err := r.Git("ls-remote", "--get-url", "--", remote)
	if err != nil {
		return ""
	}
	u, err := url.Parse(strings.TrimSpace(string(out)))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return ""
	}
	if u.User == nil {
		fill := GitRun{Dir: r.gitRunDir(), Args: []string{"credential", "fill"}, Env: r.remoteEnv(), Idle: remoteIdle,
			Stdin: strings.NewReader("protocol=" + u.Scheme + "\nhost=" + u.Host + "\npath=" + strings.TrimPrefix(u.Path, "/") + "\n\n")}
		if cred, err := fill.Run(); err == nil {
			var user, pass string
			for _, l := range strings.Split(string(cred), "\n") {
				if v, ok := strings.CutPrefix(l, "username="); ok {
					user = v
				} else if v, ok := strings.CutPrefix(l, "password="); ok {
					pass = v
				}
			}
			u.User = url.UserPassword(user, pass)
		}
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/info/refs"
	u.RawQuery = "service=" + service
	return errorPage(u.String())
}

// errorPage GETs url with curl (the URL and its credentials go on curl's
// stdin, as its config, so that no other process sees them) and returns the
// error body it answers as plain text, "" when there is none, it is
// text/plain, or curl is not installed. curl writes the response's headers,
// then its body, to its stdout, of which only the first errorPageMax bytes
// are read: curl is stopped there, since a server may answer without end.
// curl rather than net/http: linking Go's HTTP and TLS stack for this
// message cost every tally process a third of its binary and ≈ 0.2 M
// instructions of initializers.
func errorPage(url string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "curl", "--silent", "--config", "-", "--dump-header", "-")
	cmd.Stdin = strings.NewReader("url = " + curlQuote(url) + "\n")
	stdout, err := cmd.StdoutPipe()
	if err != nil || cmd.Start() != nil {
		return ""
	}
	out, _ := io.ReadAll(io.LimitReader(stdout, errorPageMax))
	cancel() // whatever is left of the body is not wanted
	cmd.Wait()
	head, body, ok := bytes.Cut(out, []byte("\r\n\r\n"))
	if !ok {
		return ""
	}
	lines := strings.Split(string(head), "\r\n")
	status := strings.Fields(lines[0]) // HTTP/<version> <code> [<reason>]
	typ := ""
	for _, line := range lines[1:] {
		if name, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(name, "Content-Type") {
			typ = strings.TrimSpace(v)
		}
	}
	if len(status) < 2 || !strings.HasPrefix(status[0], "HTTP/") || len(status[1]) != 3 || status[1] < "400" || strings.HasPrefix(typ, "text/plain") {
		return ""
	}
	return strings.TrimSpace(plainText(string(body)))
}

// errorPageMax bounds what errorPage reads of a response, headers and body.
const errorPageMax = 64 << 10

// curlQuote quotes s as a string of curl's config file: in double quotes,
// with backslash and double quote escaped.
func curlQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// remoteEnv is the environment git's network commands run with. git never
// prompts: a prompt would hang an agent (it may have a terminal it does not
// watch), so GIT_TERMINAL_PROMPT=0, and ssh runs with BatchMode=yes unless
// the user names an ssh command of their own (GIT_SSH_COMMAND, GIT_SSH or
// core.sshCommand), which is then run as git runs it. Messages are git's
// untranslated ones (LC_ALL=C), which remoteFailure classifies; what the
// server says passes through unchanged.
func (r *Repo) remoteEnv() []string {
	env := []string{"GIT_TERMINAL_PROMPT=0", "LC_ALL=C", "LANGUAGE="}
	if os.Getenv("GIT_SSH_COMMAND") == "" && os.Getenv("GIT_SSH") == "" {
		if _, ok := r.ConfigValue("core.sshCommand"); !ok {
			env = append(env, "GIT_SSH_COMMAND=ssh -o BatchMode=yes")
		}
	}
	return env
}

// ListRemoteRef returns the value of ref on the remote (zero if absent).
func (r *Repo) ListRemoteRef(remote, ref string) (ObjectID, error) {
	out, err := r.remoteGit(remote, []string{"ls-remote"}, ref)
	if err != nil {
		return ObjectID{}, remoteFailure(err, "")
	}
	// ls-remote matches patterns against the tail of each name: keep the
	// exact one.
	for _, line := range strings.Split(string(out), "\n") {
		if hex, name, ok := strings.Cut(line, "\t"); ok && name == ref {
			return ParseObjectID(hex)
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
// has into its tracking ref. git fails a whole fetch for an exact ref the
// remote lacks, so an optional ref is asked for as the pattern "Ref*" (into
// "Tracking*"), which may match nothing: remote refs that merely start with
// Ref land beside its tracking ref, and are never read. An optional ref
// the remote no longer has loses its tracking ref (--prune, which prunes
// only the destinations of the refspecs given here: "Tracking*" and this
// process's scratch ref, never the ledger's tracking ref or another
// process's scratch ref; and --no-prune-tags, so that refs/tags/* is not
// pruned whatever fetch.pruneTags and remote.<name>.pruneTags say): a
// withdrawn offer (a server's uninstalled sequencer) is not kept forever.
//
// The fetch writes only the refs named here (--refmap= keeps a configured
// remote.<name>.fetch from updating other refs, the ledger's among them),
// keeps what it receives as one pack (fetch.unpackLimit=1: git would write
// loose objects below 100, which compaction never merges and which cost
// ~4 KB of disk each), and leaves FETCH_HEAD, tags, submodules and
// automatic maintenance alone.
func (r *Repo) FetchRef(remote, ref, tracking string, optional ...RefPair) (ObjectID, error) {
	return r.FetchRefDepth(remote, 0, ref, tracking, optional...)
}

// FullDepth, as FetchRefDepth's depth, fetches all history: git's infinite
// depth (2^31-1), which also completes history an earlier shallow fetch cut.
const FullDepth = 1<<31 - 1

// FetchRefDepth is FetchRef with `git fetch --depth=<depth>` when depth > 0:
// the fetched refs' last depth commits only, counted from the fetched tips,
// their parents recorded as the shallow boundary in the repository's
// shallow file (Shallow). Depth 0 is a plain fetch, which in a shallow
// repository fetches what is new and keeps the boundary where it is.
func (r *Repo) FetchRefDepth(remote string, depth int, ref, tracking string, optional ...RefPair) (ObjectID, error) {
	return r.fetchRef(remote, depth, true, ref, tracking, optional...)
}

// FetchRefFresh is FetchRefDepth for a repository that has none of the
// history it fetches (a first contact): it offers the server no haves
// (fetch.negotiationAlgorithm=noop), so the server sends everything the
// fetch asks for. The commits of unrelated branches, which git would offer,
// can save nothing, and they cost the server a walk of the wanted history
// down to their commit dates before it gives up on them (upload-pack's
// ok_to_give_up): 1.4 s of a 3 s shallow fetch of a 100k-entry ledger.
func (r *Repo) FetchRefFresh(remote string, depth int, ref, tracking string, optional ...RefPair) (ObjectID, error) {
	return r.fetchRef(remote, depth, false, ref, tracking, optional...)
}

// fetchRef is FetchRefDepth, offering the server the repository's commits as
// haves only when haves is set.
//
// The fetch lands in a ref of this process's (scratch, scratchName) and
// tracking moves after it, forward only (landFetched): processes in the
// worktrees of one clone share tracking, and git's forced update would let
// a fetch whose advertisement came before another's move it back when it
// lands later. A fetch that lands also deletes the scratch refs that
// killed processes left (sweepScratch).
func (r *Repo) fetchRef(remote string, depth int, haves bool, ref, tracking string, optional ...RefPair) (ObjectID, error) {
	scratch := scratchName(tracking)
	specs := []string{"+" + ref + ":" + scratch}
	for _, o := range optional {
		specs = append(specs, "+"+o.Ref+"*:"+o.Tracking+"*")
	}
	args := []string{"-c", "fetch.unpackLimit=1"}
	if !haves {
		args = append(args, "-c", "fetch.negotiationAlgorithm=noop")
	}
	args = append(args, "fetch", "--quiet", "--no-tags",
		"--no-write-fetch-head", "--no-auto-maintenance", "--no-recurse-submodules", "--prune", "--no-prune-tags",
		"--no-show-forced-updates", "--refmap=")
	if depth > 0 {
		args = append(args, "--depth="+strconv.Itoa(depth))
	}
	before := r.packNames()
	// Another process of this clone moving a tracking ref during the fetch
	// fails git's update of it ("cannot lock ref"): the fetch, which changes
	// nothing else, is made again, as a dropped connection is.
	raced := func(err error) bool {
		var ge *GitError
		return droppedEarly(err) || errors.As(err, &ge) && strings.Contains(ge.Stderr, "cannot lock ref 'refs/remotes/")
	}
	err := retryDropped(connectRetryBudget, raced, func() error {
		_, err := r.remoteGit(remote, args, specs...)
		return err
	})
	var ge *GitError
	switch {
	case err == nil:
	case errors.As(err, &ge) && strings.Contains(ge.Stderr, "couldn't find remote ref "+ref):
		return ObjectID{}, nil // also what an empty remote answers
	default:
		return ObjectID{}, remoteFailure(err, "")
	}
	if err := r.syncNewPacks(before); err != nil {
		return ObjectID{}, err
	}
	fetched, err := r.ReadRef(scratch)
	if err != nil {
		return ObjectID{}, err
	}
	landed, err := r.landFetched(scratch, tracking, fetched)
	if err == nil {
		r.sweepScratch(tracking)
	}
	return landed, err
}

// landFetched moves tracking to fetched, which a fetch of this process
// left at scratch, and deletes scratch, in one `git update-ref --stdin`
// transaction conditioned on tracking's value, and returns fetched: what
// the remote said, for the caller to verify. A tracking ref that already
// descends from fetched (another process's later fetch, or sent range,
// landed first) stays where it is; a fetched tip that neither extends nor
// precedes it (a remote that rewound or forked) replaces it. Another
// process moving tracking in between is met by looking again.
func (r *Repo) landFetched(scratch, tracking string, fetched ObjectID) (ObjectID, error) {
	for tries := 0; ; tries++ {
		cur, err := r.ReadRef(tracking)
		if err != nil && !errors.Is(err, ErrNoRef) {
			return fetched, err
		}
		txn := "update " + tracking + " " + fetched.String() + " " + cur.String() + "\n"
		if cur == fetched || !cur.IsZero() && r.descends(cur, fetched) {
			txn = ""
		}
		_, err = GitRun{Dir: r.gitRunDir(), Args: []string{"update-ref", "--stdin"},
			Stdin: strings.NewReader(txn + "delete " + scratch + "\n")}.Run()
		if err == nil || tries == landTries {
			return fetched, err
		}
	}
}

// landTries bounds how often landFetched looks again at a tracking ref
// other processes keep moving.
const landTries = 8

// descendsWalk bounds the first parents descends walks.
const descendsWalk = 1024

// descends reports whether ancestor is among the first descendsWalk first
// parents of commit (a ledger's history is first parents only); false
// where the walk meets a commit this repository lacks (a shallow edge).
func (r *Repo) descends(commit, ancestor ObjectID) bool {
	db, err := r.Objects()
	if err != nil {
		return false
	}
	cur := db.Cursor()
	for i := 0; i < descendsWalk; i++ {
		c, err := cur.ReadCommit(commit)
		if err != nil || len(c.Parents) == 0 {
			return false
		}
		if commit = c.Parents[0]; commit == ancestor {
			return true
		}
	}
	return false
}

func (r *Repo) packNames() map[string]bool {
	out := map[string]bool{}
	names, _ := filepath.Glob(filepath.Join(r.ObjectDir, "pack", "*"))
	for _, n := range names {
		out[n] = true
	}
	return out
}

// syncNewPacks fsyncs the pack files written since before, and their
// directory: git fsyncs a pack it indexes but not the directory entry.
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

// PushRef moves ref on the remote from old (zero: must not exist) to new
// (zero: deletes it), sending the objects new needs, with
// `git push --porcelain --force-with-lease=<ref>:<old> <remote> <new>:<ref>`
// (`:<ref>` for a deletion).
// It returns nil only when git reports the update applied (receive-pack's
// report-status said ok for ref, or the remote already held new), a
// *RefMovedError (wrapping ErrRefChanged) when nothing was sent because the
// remote ref no longer held old, and otherwise an error wrapping ErrRemoteDenied,
// ErrPushRejected (the server's hook refused; the message carries what it
// printed) or ErrRemoteUnreachable, whose outcome the caller decides by
// listing the remote ref.
//
// The local pre-push hook does not run (--no-verify): this is tally's own
// push of its own refs, checked by the server's hook. git finds the objects
// to send in the object store itself; a background compaction that merges
// the pack holding them publishes the merged pack before removing the old
// one, and git looks again in the pack directory when an object goes
// missing from a pack it listed, so the push never misses them.
func (r *Repo) PushRef(remote, ref string, old, new ObjectID) error {
	return r.PushRefShowing(remote, ref, old, new, nil)
}

// PushRefShowing is PushRef showing git's own progress: when progress is
// not nil, what git push --progress prints on stderr (its counters, and the
// server's lines as "remote: ...") is copied to progress
// as it comes, for a push long enough to be watched (a first sync of
// thousands of entries).
func (r *Repo) PushRefShowing(remote, ref string, old, new ObjectID, progress io.Writer) error {
	expect := ""
	if !old.IsZero() {
		expect = old.String()
	}
	src := new.String()
	if new.IsZero() {
		src = ""
	}
	args := []string{"push", "--porcelain", "--no-verify", "--no-signed",
		"--no-follow-tags", "--no-recurse-submodules", "--force-with-lease=" + ref + ":" + expect}
	var out []byte
	err := retryDropped(connectRetryBudget, unsentPush, func() error {
		var err error
		out, err = r.remoteGitShowing(remote, progress, args, src+":"+ref)
		return err
	})
	flag, summary, found := porcelainStatus(string(out), ref)
	switch {
	case err == nil && found && flag != "!":
		return nil
	case found && summary == "[rejected] (stale info)":
		return &RefMovedError{Ref: ref}
	case err == nil:
		return fmt.Errorf("%w: git push reported no status for %s", ErrRemoteUnreachable, ref)
	}
	return remoteFailure(err, summary)
}

// porcelainLine is one ref's status line of `git push --porcelain`:
// "<flag>\t<from>:<to>\t<summary>".
type porcelainLine struct{ flag, from, to, summary string }

// porcelainFind returns the first status line of out that match accepts.
func porcelainFind(out string, match func(porcelainLine) bool) (porcelainLine, bool) {
	for _, line := range strings.Split(out, "\n") {
		f := strings.SplitN(line, "\t", 3)
		if len(f) != 3 || len(f[0]) != 1 {
			continue
		}
		from, to, ok := strings.Cut(f[1], ":")
		if pl := (porcelainLine{f[0], from, to, f[2]}); ok && match(pl) {
			return pl, true
		}
	}
	return porcelainLine{}, false
}

// porcelainStatus finds ref's line (by its destination) and returns its
// flag and summary.
func porcelainStatus(out, ref string) (flag, summary string, found bool) {
	pl, found := porcelainFind(out, func(pl porcelainLine) bool { return pl.to == ref })
	return pl.flag, pl.summary, found
}

// splitStderr parts git's stderr into what the server said (its "remote:"
// lines, prefix removed) and git's own lines, each without progress noise,
// joined with "; ", markup reduced to words.
func splitStderr(s string) (said, own string) {
	var server, local []string
	for _, l := range strings.Split(strings.ReplaceAll(s, "\r", "\n"), "\n") {
		l = strings.TrimSpace(l)
		if rest, ok := strings.CutPrefix(l, "remote:"); ok {
			server = append(server, rest)
		} else if l != "" {
			local = append(local, l)
		}
	}
	return saidText(server), plainText(strings.Join(local, "; "))
}

// saidText is what the server said in lines (its "remote:" lines, prefix
// removed), each trimmed, the empty ones dropped, joined with "; ", markup
// reduced to words.
func saidText(lines []string) string {
	var kept []string
	for _, l := range lines {
		if l = strings.TrimSpace(l); l != "" {
			kept = append(kept, l)
		}
	}
	return plainText(strings.Join(kept, "; "))
}

func joinWords(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, "; ")
}

// remoteFailure is the one place a failed network command of git is
// classified, from what git and the server printed and, for a push, git's
// report for the ref (status: "[remote rejected] (pre-receive hook
// declined)"; "" for fetches and listings): a denial of access
// (ErrRemoteDenied) first — in the server's words or git's — then a refusal
// of the push by the server's hook (ErrPushRejected), reported with what
// the server printed; anything else, even a failure that printed text (an
// unpack error while the clone was being repacked), is transient
// (ErrRemoteUnreachable). Every message is plain text: an HTML error page is
// reduced to its words.
func remoteFailure(err error, status string) error {
	var ge *GitError
	if !errors.As(err, &ge) {
		if errors.Is(err, ErrNoRemote) {
			return err
		}
		return fmt.Errorf("%w: %v", ErrRemoteUnreachable, err)
	}
	said, own := splitStderr(ge.Stderr)
	own = joinWords(status, own)
	if own == "" && said == "" {
		own = ge.Err.Error()
	}
	return classifyFailure(said, own)
}

// classifyFailure is remoteFailure's verdict on a failure, given what the
// server said (its "remote:" lines, joined by saidText) and the client's
// own words for it in git's phrasing ("fatal: remote error: …" for a
// daemon's ERR line): the native push (receivepack.go), which has no git
// stderr to parse, hands it the same two texts git would have printed.
func classifyFailure(said, own string) error {
	msg := joinWords(said, own)
	switch {
	case deniedWords(own) || deniedWords(said):
		return fmt.Errorf("%w: %s", ErrRemoteDenied, msg)
	case notFound(own):
		return fmt.Errorf("%w: %s (or access to it denied)", ErrRemoteDenied, msg)
	case strings.Contains(own, "hook declined"):
		if said == "" {
			said = own
		}
		return fmt.Errorf("%w: %s", ErrPushRejected, said)
	}
	for _, c := range unreachableCauses {
		for _, w := range c.words {
			if strings.Contains(own, w) {
				return fmt.Errorf("%w: %s: %s", ErrRemoteUnreachable, c.cause, msg)
			}
		}
	}
	return fmt.Errorf("%w: %s", ErrRemoteUnreachable, msg)
}

// unreachableCauses name, in the same words whatever the transport, why a
// server could not be reached, from what git, curl (for HTTP) and ssh say.
// curl does not tell a refused connection from an unreachable host.
var unreachableCauses = []struct {
	words []string
	cause string
}{
	{[]string{"Connection refused"}, "connection refused"},
	{[]string{"Couldn't connect to server"}, "could not connect (connection refused or host unreachable)"},
	{[]string{"Could not resolve host", "Could not resolve hostname", "Name or service not known", "Temporary failure in name resolution"}, "host not found"},
	{[]string{"timed out", "Timeout was reached"}, "timed out"},
}

// deniedPhrases are what servers and git say when a user is refused, in the
// words of gitolite (its "DENIED by <rule or fallthru>"), ssh, git daemon
// (whose ERR lines git prints as "remote error: "), and git's HTTP
// transport. They are matched case-sensitively: tally's own refusals
// (PUSHER-DENIED, a hook's "permission denied" on a file) are the hook's
// verdict on the push, not a denial of access.
var deniedPhrases = []string{
	"DENIED by ",
	"Permission denied (",
	"Host key verification failed",
	"service not enabled",
	"access denied or repository not exported",
	"remote error: ",
	"Authentication failed",
	"terminal prompts disabled", // credentials needed, and none configured
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

// notFound reports git's words for a repository the server says is not
// there (HTTP 404, a path ssh's server does not have).
func notFound(s string) bool {
	return strings.Contains(s, "does not appear to be a git repository") ||
		(strings.Contains(s, "repository '") && strings.Contains(s, "' not found"))
}

// plainText reduces s to plain words when it holds markup (an HTML error
// page in an HTTP response): the content of script and style elements and
// every tag and comment go, entities are decoded and runs of white space
// become one space. A "<" that does not open a tag (a letter, "/", "!" or
// "?" after it) is text, as in HTML. Text without markup is returned as it
// is. The standard library's html decodes the entities (its table is built
// on first use); golang.org/x/net/html's tokenizer did this before, at the
// price of building its entity table in every tally process's initializers.
func plainText(s string) string {
	if !strings.Contains(s, "<") || !strings.Contains(s, ">") {
		return s
	}
	var b strings.Builder
	for s != "" {
		i := strings.IndexByte(s, '<')
		if i < 0 {
			b.WriteString(html.UnescapeString(s))
			break
		}
		b.WriteString(html.UnescapeString(s[:i]))
		s = s[i:]
		if len(s) < 2 || !opensTag(s[1]) {
			b.WriteByte('<')
			s = s[1:]
			continue
		}
		end := ">"
		if strings.HasPrefix(s, "<!--") {
			end = "-->"
		}
		j := strings.Index(s, end)
		if j < 0 {
			break // an unterminated tag: the rest is inside it
		}
		tag := s[1:j]
		s = s[j+len(end):]
		b.WriteByte(' ')
		if name := strings.ToLower(tagName(tag)); name == "script" || name == "style" {
			// raw text up to the element's end tag, which the loop then drops
			k := strings.Index(strings.ToLower(s), "</"+name)
			if k < 0 {
				break
			}
			s = s[k:]
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// opensTag reports whether c, after a "<", makes it the start of a tag, an
// end tag, a comment or a declaration.
func opensTag(c byte) bool {
	return c|0x20 >= 'a' && c|0x20 <= 'z' || c == '/' || c == '!' || c == '?'
}

// tagName is the element name a start tag's text (what is between "<" and
// ">") opens; "" for an end tag, a comment or a declaration.
func tagName(tag string) string {
	n := 0
	for n < len(tag) && (tag[n]|0x20 >= 'a' && tag[n]|0x20 <= 'z' || tag[n] >= '0' && tag[n] <= '9') {
		n++
	}
	return tag[:n]
}

// RefMovedError reports a push not sent because the remote ref no longer held
// the expected value when the server advertised it. git does not say what
// it held: a caller that needs it fetches (it needs the objects anyway).
type RefMovedError struct{ Ref string }

func (e *RefMovedError) Error() string { return "remote ref " + e.Ref + " moved" }
func (e *RefMovedError) Unwrap() error { return ErrRefChanged }

// Shallow returns the commits the repository's shallow file lists (git's
// boundary of a shallow fetch: commits whose parents were not fetched),
// none for a complete repository.
func (r *Repo) Shallow() []ObjectID {
	b, err := os.ReadFile(filepath.Join(r.CommonDir, "shallow"))
	if err != nil {
		return nil
	}
	var out []ObjectID
	for _, line := range strings.Fields(string(b)) {
		if id, err := ParseObjectID(line); err == nil {
			out = append(out, id)
		}
	}
	return out
}
