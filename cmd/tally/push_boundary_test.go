package main

// The push boundary, attacked with plain git: commits staged on other refs,
// evil merges, and the rest of the namespace (checkpoints, unknown refs,
// receipt notes), against a real server running tally's pre-receive hook,
// and the same staging and merge cases against the client's pre-push hook.

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tally-dev/tally/internal/gitserver"
	"github.com/tally-dev/tally/internal/testrepo"
)

// boundary is a server with a seeded ledger and helpers to work in clones
// with plain git as a given author.
type boundary struct {
	*netCluster
	seed string
}

func newBoundary(t *testing.T, kind gitserver.Kind) *boundary {
	c := newNetCluster(t, kind)
	b := &boundary{netCluster: c, seed: c.clone("seed")}
	b.admin("init")
	b.admin("plan", netPlan(t, b.seed, "w", 4, nil))
	b.admin("plan", netPlan(t, b.seed, "p", 1, []string{"src/**"}))
	return b
}

func (b *boundary) admin(args ...string) map[string]any {
	b.t.Helper()
	return b.ok(b.seed, "admin", nil, append([]string{"--remote", "origin"}, args...)...)
}

// tally runs a remote-mode command in dir as actor.
func (b *boundary) tally(dir, actor string, args ...string) map[string]any {
	b.t.Helper()
	return b.ok(dir, actor, nil, append([]string{"--remote", "origin"}, args...)...)
}

// gitAs runs git in dir as author and committer email.
func (b *boundary) gitAs(dir, email string, args ...string) string {
	b.t.Helper()
	out, err := netGit(dir, []string{"GIT_AUTHOR_EMAIL=" + email, "GIT_COMMITTER_EMAIL=" + email}, args...)
	if err != nil {
		b.t.Fatal(err)
	}
	return out
}

// commit writes file in dir and commits it as email; it returns the commit.
func (b *boundary) commit(dir, email, file string) string {
	b.t.Helper()
	path := filepath.Join(dir, file)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(email+" wrote "+file+"\n"), 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.gitAs(dir, email, "add", file)
	b.gitAs(dir, email, "commit", "-q", "-m", file)
	return testrepo.Git(b.t, dir, "rev-parse", "HEAD")
}

// refused pushes with plain git and requires a refusal of ref with code
// (by the server, or by the client's pre-push hook when client is set) that
// leaves every server ref where it was.
func (b *boundary) refused(what, dir, ref, code, detail string, client bool, args ...string) {
	b.t.Helper()
	before := b.lsRemote()
	exit, stderr := b.push(dir, args...)
	want := "tally: refused " + ref + ": " + code
	if exit == 0 || !strings.Contains(stderr, want) || !strings.Contains(stderr, detail) {
		b.t.Fatalf("%s: git push %v: exit %d, want %q and %q:\n%s", what, args, exit, want, detail, stderr)
	}
	if fromServer := strings.Contains(stderr, "remote: "+want); fromServer == client {
		b.t.Fatalf("%s: refused by the wrong side (client hook expected: %v):\n%s", what, client, stderr)
	}
	if after := b.lsRemote(); after != before {
		b.t.Fatalf("%s: refused push moved the server's refs:\n%s\n->\n%s", what, before, after)
	}
	b.t.Logf("%s: %s", what, netFirstLine(stderr, want))
}

func itoa(n int) string { return strconv.Itoa(n) }

func (b *boundary) accepted(what, dir string, args ...string) {
	b.t.Helper()
	if exit, stderr := b.push(dir, args...); exit != 0 {
		b.t.Fatalf("%s: git push %v refused:\n%s", what, args, stderr)
	}
}

// TestPushStagedCommits: a commit that reached the server on another ref
// first is still checked when it enters a protected branch. Receipts: an
// unreceipted commit pushed to an unprotected branch, then fast-forwarded
// onto main, is RECEIPT-MISSING. Path leases: a commit pushed to a side
// branch before a cell's paths were claimed, then moved onto main while
// another actor holds them, is PATH-HELD. With the client's pre-push hook
// installed, the client refuses both before the server is asked.
func TestPushStagedCommits(t *testing.T) {
	for _, kind := range gitserver.Kinds {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			b := newBoundary(t, kind)
			b.admin("policy", "set", "--receipts", "enforce", "--protected", "refs/heads/main", "--path-leases", "enforce")
			x := b.clone("mallory")
			for _, client := range []bool{false, true} {
				if client {
					b.ok(x, "mallory@example.com", nil, "hooks", "install")
				}
				side := "refs/heads/staging"
				if client {
					side = "refs/heads/staging2"
				}
				testrepo.Git(t, x, "checkout", "-q", "-B", "work", "origin/main")
				staged := b.commit(x, "mallory@example.com", "notes-"+side[len("refs/heads/"):]+".txt")
				b.accepted("unreceipted commit on an unprotected branch", x, "origin", "HEAD:"+side)
				testrepo.Git(t, x, "fetch", "-q", "origin", "+refs/tally/ledger:refs/tally/ledger") // what the client hook judges by
				b.refused("the staged commit onto main", x, "refs/heads/main", "RECEIPT-MISSING", staged, client, "origin", "HEAD:refs/heads/main")
			}

			// Path leases: staged before the claim, landed during it.
			b.admin("policy", "set", "--receipts", "off")
			testrepo.Git(t, x, "checkout", "-q", "-B", "src-work", "origin/main")
			early := b.commit(x, "mallory@example.com", "src/early.go")
			b.accepted("a commit under src/ while nobody holds it", x, "--no-verify", "origin", "HEAD:refs/heads/src-side")
			a := b.clone("alice")
			b.tally(a, "alice@example.com", "claim", "p/c000", "--ttl", "3600")
			testrepo.Git(t, x, "fetch", "-q", "origin", "+refs/tally/ledger:refs/tally/ledger")
			b.refused("the staged src/ commit onto main, client hook", x, "refs/heads/main", "PATH-HELD", early, true, "origin", "HEAD:refs/heads/main")
			b.refused("the staged src/ commit onto main", x, "refs/heads/main", "PATH-HELD", early, false, "--no-verify", "origin", "HEAD:refs/heads/main")
		})
	}
}

// TestPushEvilMerge: a merge that only joins checked work passes without a
// receipt of its own; a merge whose tree changes a path beyond what either
// parent has (an "evil merge") is judged like any commit: RECEIPT-MISSING on
// the protected branch and PATH-HELD under another actor's lease, by the
// server and by the client's pre-push hook.
func TestPushEvilMerge(t *testing.T) {
	b := newBoundary(t, gitserver.GitDaemon)
	b.admin("policy", "set", "--receipts", "enforce", "--protected", "refs/heads/main", "--path-leases", "enforce")
	base := testrepo.Git(t, b.seed, "rev-parse", "HEAD")
	a, bob := b.clone("alice"), b.clone("bob")

	// Two receipted lines of work, then a clean merge of them.
	b.tally(a, "alice@example.com", "claim", "w/c000")
	b.commit(a, "alice@example.com", "a.txt")
	b.tally(a, "alice@example.com", "done", "w/c000", "--epoch", "1")
	b.accepted("alice's receipted commit", a, "origin", "main")
	b.tally(bob, "bob@example.com", "claim", "w/c001")
	b.commit(bob, "bob@example.com", "b.txt")
	b.tally(bob, "bob@example.com", "done", "w/c001", "--epoch", "1")
	testrepo.Git(t, bob, "fetch", "-q", "origin")
	b.gitAs(bob, "bob@example.com", "merge", "-q", "--no-ff", "-m", "merge alice", "origin/main")
	if p := strings.Fields(testrepo.Git(t, bob, "log", "-1", "--format=%P")); len(p) != 2 {
		t.Fatalf("not a merge: parents %v", p)
	}
	b.accepted("a clean merge of receipted commits", bob, "origin", "main")

	// An evil merge: alice holds src/**; bob's merge adds src/evil.go that
	// neither parent has.
	b.tally(a, "alice@example.com", "claim", "p/c000", "--ttl", "3600")
	testrepo.Git(t, bob, "checkout", "-q", "-b", "side", base)
	b.commit(bob, "bob@example.com", "side.txt")
	testrepo.Git(t, bob, "checkout", "-q", "main")
	b.gitAs(bob, "bob@example.com", "merge", "-q", "--no-ff", "--no-commit", "side")
	if err := os.MkdirAll(filepath.Join(bob, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bob, "src", "evil.go"), []byte("package evil\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b.gitAs(bob, "bob@example.com", "add", "src/evil.go")
	b.gitAs(bob, "bob@example.com", "commit", "-q", "-m", "merge side")
	merge := testrepo.Git(t, bob, "rev-parse", "HEAD")
	b.refused("an evil merge under alice's lease", bob, "refs/heads/main", "PATH-HELD", "merge "+merge+" by bob@example.com changes src/evil.go, leased to alice@example.com", false, "origin", "main")
	b.refused("an evil merge without a receipt", bob, "refs/heads/main", "RECEIPT-MISSING", "merge "+merge, false, "origin", "main")
	b.ok(bob, "bob@example.com", nil, "hooks", "install")
	testrepo.Git(t, bob, "fetch", "-q", "origin", "+refs/tally/ledger:refs/tally/ledger")
	b.refused("an evil merge, client hook", bob, "refs/heads/main", "PATH-HELD", "merge "+merge, true, "origin", "main")
}

// TestPushNamespaceGuarded: under the namespace only the ledger and stored
// checkpoints exist, checkpoints only grow signatures, and receipt notes
// only gain lines that name receipts the ledger holds. Each forgery is
// pushed with plain git and refused; the honest pushes around them pass.
func TestPushNamespaceGuarded(t *testing.T) {
	b := newBoundary(t, gitserver.GitDaemon)
	x := b.clone("mallory")
	fetchAll := func() {
		testrepo.Git(t, x, "fetch", "-q", "origin", "+refs/tally/*:refs/tally/*", "+refs/notes/*:refs/notes/*")
	}
	blob := func(text string) string {
		t.Helper()
		f := filepath.Join(t.TempDir(), "blob")
		if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return testrepo.Git(t, x, "hash-object", "-w", f)
	}
	push := func(refspec string) []string { return []string{"--no-verify", "origin", refspec} }

	// Undefined refs under the namespace.
	head := testrepo.Git(t, x, "rev-parse", "HEAD")
	b.refused("a stash ref under the namespace", x, "refs/tally/stash", "POLICY", "not a ref tally defines", false, push(head+":refs/tally/stash")...)
	b.refused("a checkpoint name that is no size", x, "refs/tally/checkpoints/007", "POLICY", "not a ref tally defines", false, push(head+":refs/tally/checkpoints/007")...)

	// An honest checkpoint, saved and pushed, then signed and pushed again.
	b.tally(b.seed, "admin", "claim", "w/c000")
	testrepo.Git(t, b.seed, "fetch", "-q", "origin", "+refs/tally/ledger:refs/tally/ledger")
	cp := b.ok(b.seed, "admin", nil, "checkpoint", "--save")
	size := int(num(t, cp, "size"))
	ref := "refs/tally/checkpoints/" + itoa(size)
	b.accepted("an honest checkpoint", b.seed, "origin", ref)
	key := filepath.Join(t.TempDir(), "ck")
	b.ok(b.seed, "admin", nil, "keys", "generate", "--out", key)
	b.ok(b.seed, "admin", nil, "checkpoint", "--save", "--sign", key)
	b.accepted("the same checkpoint gaining a signature (git needs + for a blob ref)", b.seed, "origin", "+"+ref)
	fetchAll()
	signed := testrepo.Git(t, x, "cat-file", "blob", ref) + "\n"
	body, _, _ := strings.Cut(signed, "\n\n")
	body += "\n"

	b.refused("a stored checkpoint deleted", x, ref, "POLICY", "append-only", false, push(":"+ref)...)
	b.refused("a stored checkpoint losing its signature", x, ref, "POLICY", "drops the signature", false, push("+"+blob(body)+":"+ref)...)
	other := strings.Replace(body, strings.Split(body, "\n")[2], base64.StdEncoding.EncodeToString(make([]byte, 32)), 1)
	b.refused("a stored checkpoint rewritten", x, ref, "FORK-DETECTED", "diverged", false, push("+"+blob(other)+":"+ref)...)
	lines := strings.Split(body, "\n")
	beyond := lines[0] + "\n" + itoa(size+5) + "\n" + lines[2] + "\n"
	b.refused("a checkpoint beyond the ledger", x, "refs/tally/checkpoints/"+itoa(size+5), "ROLLBACK-DETECTED", "checkpoint saw", false,
		push(blob(beyond)+":refs/tally/checkpoints/"+itoa(size+5))...)
	b.refused("a checkpoint stored under another size", x, "refs/tally/checkpoints/1", "CHECKPOINT-INVALID", "is of size", false,
		push(blob(body)+":refs/tally/checkpoints/1")...)
	b.refused("a checkpoint ref at a commit", x, "refs/tally/checkpoints/1", "CHECKPOINT-INVALID", "not a commit", false,
		push(head+":refs/tally/checkpoints/1")...)
	// The same root spelled with base64's unused low bits set decodes to the
	// same hash: only a canonical-form check tells them apart.
	root := lines[2]
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	respelled := root[:len(root)-2] + string(alphabet[strings.IndexByte(alphabet, root[len(root)-2])|1]) + "="
	b.refused("a checkpoint whose root is not canonical base64", x, ref, "CHECKPOINT-INVALID", "not a base64 32-byte hash", false,
		push("+"+blob(strings.Replace(signed, root, respelled, 1))+":"+ref)...)
	b.refused("a checkpoint with a garbage signature line", x, ref, "CHECKPOINT-INVALID", "signature line", false,
		push("+"+blob(signed+"not a signature\n")+":"+ref)...)
	// A note for a size not stored yet, right in all but its commit line,
	// would squat that size: the signer's true note differs in its body and
	// so could never be stored there.
	b.tally(b.seed, "admin", "claim", "w/c002")
	testrepo.Git(t, b.seed, "fetch", "-q", "origin", "+refs/tally/ledger:refs/tally/ledger")
	next := b.ok(b.seed, "admin", nil, "checkpoint", "--save")
	nextRef := "refs/tally/checkpoints/" + itoa(int(num(t, next, "size")))
	fetchAll()
	nextBody := testrepo.Git(t, b.seed, "cat-file", "blob", nextRef) + "\n"
	_, named, _ := strings.Cut(nextBody, "tally-commit ")
	named = strings.TrimSpace(named)
	parent := testrepo.Git(t, x, "rev-parse", named+"^")
	b.refused("a checkpoint whose commit line names another commit", x, nextRef, "FORK-DETECTED", "the checkpoint names "+parent, false,
		push(blob(strings.Replace(nextBody, named, parent, 1))+":"+nextRef)...)
	b.accepted("the true checkpoint of that size", b.seed, "origin", nextRef)

	// Receipt notes: an honest receipt's note is pushed; forged lines are not.
	a := b.clone("alice")
	b.tally(a, "alice@example.com", "claim", "w/c001")
	work := b.commit(a, "alice@example.com", "a.txt")
	b.accepted("alice's work", a, "origin", "main")
	b.tally(a, "alice@example.com", "done", "w/c001", "--epoch", "1")
	if note := testrepo.Git(t, a, "notes", "--ref=tally", "show", work); !strings.HasPrefix(note, "tally-receipt ") {
		t.Fatalf("done wrote no note: %q", note)
	}
	b.accepted("the receipt's note", a, "origin", "refs/notes/tally")
	fetchAll()
	honest := testrepo.Git(t, x, "notes", "--ref=tally", "show", work)
	testrepo.Git(t, x, "fetch", "-q", "origin", "main")
	mine := b.commit(x, "mallory@example.com", "m.txt")
	b.accepted("mallory's own work", x, "--no-verify", "origin", "HEAD:refs/heads/mallory")
	testrepo.Git(t, x, "notes", "--ref=tally", "add", "-m", honest, mine)
	b.refused("alice's receipt line copied onto mallory's commit", x, "refs/notes/tally", "RECEIPT-INVALID", "names no receipt of that commit", false,
		push("refs/notes/tally")...)
	testrepo.Git(t, x, "update-ref", "refs/notes/tally", "refs/notes/tally^")
	testrepo.Git(t, x, "notes", "--ref=tally", "append", "-m", "reviewed: all good", work)
	b.refused("free text added to a receipt note", x, "refs/notes/tally", "RECEIPT-INVALID", "names no receipt", false, push("refs/notes/tally")...)
	testrepo.Git(t, x, "update-ref", "refs/notes/tally", "refs/notes/tally^")
	testrepo.Git(t, x, "notes", "--ref=tally", "remove", work)
	b.refused("a receipt note removed", x, "refs/notes/tally", "RECEIPT-INVALID", "append-only", false, push("refs/notes/tally")...)
	testrepo.Git(t, x, "update-ref", "refs/notes/tally", testrepo.Git(t, x, "commit-tree", "-m", "rewritten", "4b825dc642cb6eb9a060e54bf8d69288fbee4904"))
	b.refused("the notes history rewritten", x, "refs/notes/tally", "POLICY", "fast-forward", false, push("+refs/notes/tally")...)
	b.refused("the notes deleted", x, "refs/notes/tally", "POLICY", "append-only", false, push(":refs/notes/tally")...)
	if got := testrepo.Git(t, b.bare, "notes", "--ref=tally", "show", work); got != honest {
		t.Fatalf("server note of %s is %q, want %q", work, got, honest)
	}
}

// TestPushAuthorIdentity: path leases compare the holder (an actor name) with
// the commit's author email. An agent named agent-1 whose git identity is
// agent-1@ci.example.com has its own commits under its lease refused, and
// the refusal says which email it compared; once the policy maps agent-1 to
// that email its commits pass, and another author's still do not.
func TestPushAuthorIdentity(t *testing.T) {
	b := newBoundary(t, gitserver.GitDaemon)
	b.admin("policy", "set", "--path-leases", "enforce")
	a := b.clone("agent-1")
	b.tally(a, "agent-1", "claim", "p/c000", "--ttl", "3600")
	b.commit(a, "agent-1@ci.example.com", "src/one.go")
	b.refused("the holder's commit under another email", a, "refs/heads/main", "PATH-HELD",
		"author agent-1@ci.example.com is not agent-1's", false, "origin", "main")
	b.admin("policy", "set-authors", "agent-1=agent-1@ci.*")
	if p := obj(t, b.admin("policy", "show"), "policy"); fmt.Sprint(p["authors"]) != "map[agent-1:[agent-1@ci.*]]" {
		t.Fatalf("policy show: authors %v", p["authors"])
	}
	b.accepted("the holder's commit once mapped", a, "origin", "main")
	bob := b.clone("bob")
	b.commit(bob, "bob@example.com", "src/two.go")
	b.refused("someone else's commit", bob, "refs/heads/main", "PATH-HELD", "leased to agent-1", false, "origin", "main")
}
