package ledger_test

// The ledger's remote mode (AppendRemote, FetchRemote, Sync) against real git
// servers started by the tests (git daemon and smart HTTP, see
// internal/gitserver), with clones made by the git CLI and entries written by
// the real tally binary where the test is about what an agent does. The
// server's ledger is read back with git in the bare repository.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/internal/gitserver"
	"github.com/tally-dev/tally/internal/testrepo"
	"github.com/tally-dev/tally/ledger"
)

// remoteSite is a bare repository served by a real git server, and its clones.
type remoteSite struct {
	t    *testing.T
	bare string
	url  string
}

// newRemoteSite serves a fresh bare repository; hook false removes tally's
// pre-receive hook (a server where nothing checks pushes).
func newRemoteSite(t *testing.T, kind gitserver.Kind, hook bool) *remoteSite {
	t.Helper()
	root := t.TempDir()
	bare := gitserver.NewBare(t, root, "shared.git")
	if !hook {
		if err := os.Remove(filepath.Join(bare, "hooks", "pre-receive")); err != nil {
			t.Fatal(err)
		}
	}
	return &remoteSite{t: t, bare: bare, url: gitserver.Start(t, kind, root) + "/shared.git"}
}

// clone clones the repository (origin = the server); the first clone makes
// and pushes the root commit of main.
func (s *remoteSite) clone(name string) string {
	s.t.Helper()
	dir := filepath.Join(s.t.TempDir(), name)
	testrepo.Git(s.t, filepath.Dir(dir), "clone", "-q", s.url, dir)
	testrepo.CheckObjects(s.t, dir) // fetches of what the server wrote, under testrepo.FsckVar
	s.t.Cleanup(func() { waitMaintenance(s.t, dir) })
	if _, err := gitTry(dir, nil, "rev-parse", "-q", "--verify", "HEAD"); err != nil {
		testrepo.Git(s.t, dir, "symbolic-ref", "HEAD", "refs/heads/main")
		testrepo.Git(s.t, dir, "commit", "-q", "--allow-empty", "-m", "root")
		testrepo.Git(s.t, dir, "push", "-q", "origin", "main")
	}
	return dir
}

// tally runs the binary with --json in dir as actor and requires success.
func (s *remoteSite) tally(dir, actor string, args ...string) map[string]any {
	s.t.Helper()
	r := testrepo.Run(s.t, dir, actor, nil, append([]string{"--json"}, args...)...)
	if r.Code != 0 || r.JSON["ok"] != true {
		s.t.Fatalf("tally %v in %s as %s: exit %d %s%s", args, filepath.Base(dir), actor, r.Code, r.Stdout, r.Stderr)
	}
	return r.JSON
}

// serverTip is the server's ledger ref, read in the bare repository.
func (s *remoteSite) serverTip() string {
	s.t.Helper()
	return testrepo.Git(s.t, s.bare, "rev-parse", ledgerRef)
}

func remotePlanFile(t *testing.T, wave string, cells ...string) string {
	t.Helper()
	var cs []string
	for _, c := range cells {
		cs = append(cs, fmt.Sprintf(`{"id":%q}`, c))
	}
	f := filepath.Join(t.TempDir(), wave+".json")
	if err := os.WriteFile(f, []byte(fmt.Sprintf(`{"wave":%q,"cells":[%s]}`, wave, strings.Join(cs, ","))), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

func remoteSyncIn(t *testing.T, dir string) *ledger.SyncReport {
	t.Helper()
	l := openLedger(t, dir)
	rep, err := l.Sync("origin")
	if err != nil {
		t.Fatalf("Sync in %s: %v", filepath.Base(dir), err)
	}
	return rep
}

// TestRemoteSync: tally sync fast-forwards, pushes, and rebuilds. Two clones
// claim the same cell while offline (--local); the first to sync wins, and
// the second's sync reports its claim as not applied (LEASE-HELD) while its
// other local entries are rebuilt on the remote tip and pushed. Afterwards
// both clones hold the server's ledger and verify it locally.
func TestRemoteSync(t *testing.T) {
	for _, kind := range gitserver.Kinds {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			s := newRemoteSite(t, kind, true)
			a, b := s.clone("a"), s.clone("b")
			for _, dir := range []string{a, b} {
				s.tally(dir, "x", "remote", "set", "origin")
			}
			s.tally(a, "A", "init")
			s.tally(a, "A", "plan", remotePlanFile(t, "w", "x", "y"))

			rep := remoteSyncIn(t, b)
			if rep.Action != "fast-forward" || rep.Entries != 2 || rep.Tip != s.serverTip() || len(rep.Rebuilt)+len(rep.Dropped) != 0 {
				t.Fatalf("first sync of b: %+v (server at %s)", rep, s.serverTip())
			}
			if got := tip(t, b); got != s.serverTip() {
				t.Fatalf("b's local ledger at %s after a fast-forward to %s", got, s.serverTip())
			}
			if rep := remoteSyncIn(t, b); rep.Action != "up-to-date" || rep.Entries != 2 {
				t.Fatalf("second sync of b: %+v", rep)
			}

			// Local-only entries are pushed as they are.
			s.tally(a, "A", "--local", "note", "written offline by A")
			local := tip(t, a)
			if rep := remoteSyncIn(t, a); rep.Action != "pushed" || rep.Tip != local || s.serverTip() != local || rep.Entries != 3 {
				t.Fatalf("sync of a: %+v (local %s, server %s)", rep, local, s.serverTip())
			}
			if rep := remoteSyncIn(t, b); rep.Action != "fast-forward" || rep.Entries != 3 {
				t.Fatalf("sync of b: %+v", rep)
			}

			// Both claim w/x offline; b also writes a note and claims w/y.
			s.tally(a, "A", "--local", "claim", "w/x")
			s.tally(b, "B", "--local", "claim", "w/x")
			s.tally(b, "B", "--local", "note", "written offline by B")
			s.tally(b, "B", "--local", "claim", "w/y")
			if rep := remoteSyncIn(t, a); rep.Action != "pushed" || rep.Entries != 4 {
				t.Fatalf("sync of a: %+v", rep)
			}
			r := s.tally(b, "B", "sync") // the command line's report
			var got ledger.SyncReport
			if raw, err := json.Marshal(r); err != nil || json.Unmarshal(raw, &got) != nil {
				t.Fatalf("sync report %v", r)
			}
			want := ledger.SyncReport{Remote: "origin", Action: "rebuilt", Tip: s.serverTip(), Entries: 6,
				Rebuilt: []ledger.RebuiltEntry{{OldSeq: 4, NewSeq: 4, Kind: "note", Actor: "B"}, {OldSeq: 5, NewSeq: 5, Kind: "claim", Actor: "B"}}}
			if len(got.Dropped) != 1 {
				t.Fatalf("sync of b: dropped %+v", got.Dropped)
			}
			d := got.Dropped[0]
			if d.OldSeq != 3 || d.Kind != "claim" || d.Actor != "B" || d.Code != "LEASE-HELD" || !strings.Contains(d.Message, "A") ||
				!strings.Contains(string(d.Body), `"cell":"x"`) {
				t.Fatalf("sync of b: dropped %+v", d)
			}
			got.Dropped = nil
			if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
				t.Fatalf("sync of b:\n got %+v\nwant %+v", got, want)
			}
			if tip(t, b) != s.serverTip() {
				t.Fatalf("b's local ledger is not the server's after the rebuild")
			}
			if rep := remoteSyncIn(t, a); rep.Action != "fast-forward" || rep.Tip != s.serverTip() {
				t.Fatalf("last sync of a: %+v", rep)
			}
			// What the server holds, read with git.
			var summary []string
			for _, e := range readChain(t, s.bare) {
				summary = append(summary, e.Kind+":"+e.Actor+":"+e.Text)
			}
			if got, want := strings.Join(summary, " "), "genesis:A: plan:A: note:A:written offline by A claim:A: note:B:written offline by B claim:B:"; got != want {
				t.Fatalf("server ledger:\n got %s\nwant %s", got, want)
			}
			subjects := strings.Split(testrepo.Git(t, s.bare, "log", "--format=%s", ledgerRef), "\n")
			if subjects[0] != "claim w/y epoch 1" || subjects[2] != "claim w/x epoch 1" {
				t.Fatalf("server ledger subjects %q", subjects)
			}
			for _, dir := range []string{a, b} {
				verifyOK(t, dir, false)
				verifyOK(t, dir, true)
			}
		})
	}
}

// TestRemoteAppendRaceInProcess: goroutines, each with its own clone and
// Ledger, append notes through the server with AppendRemote. Every
// acknowledged append is on the server exactly once at the seq and commit it
// was acknowledged with, and nothing unacknowledged is. Also against a server
// without tally's hook, where nothing but the push's compare-and-swap keeps
// a writer from overwriting another's entry.
func TestRemoteAppendRaceInProcess(t *testing.T) {
	writers, each := 4, 4
	if os.Getenv("TALLY_STRESS") == "1" {
		writers, each = 8, 25
	}
	type variant struct {
		kind gitserver.Kind
		hook bool
	}
	variants := []variant{{gitserver.GitDaemon, true}, {gitserver.SmartHTTP, true}, {gitserver.GitDaemon, false}}
	for _, v := range variants {
		name := string(v.kind)
		if !v.hook {
			name += "-nohook" // the push's compare-and-swap alone, nothing checking on the server
		}
		kind := v.kind
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newRemoteSite(t, kind, v.hook)
			seed := s.clone("seed")
			s.tally(seed, "A", "--remote", "origin", "init")
			type ack struct {
				seq    uint64
				commit string
			}
			acks := map[string]ack{}
			conflicts := 0
			var mu sync.Mutex
			var wg sync.WaitGroup
			errc := make(chan error, writers)
			for w := 0; w < writers; w++ {
				dir := s.clone(fmt.Sprintf("w%d", w))
				l := openLedger(t, dir)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < each; i++ {
						text := fmt.Sprintf("w%d-%d", w, i)
						out, err := l.AppendRemote("origin", fmt.Sprintf("writer-%d", w), []ledger.BuildFunc{noteDraft(text)})
						mu.Lock()
						switch {
						case err == nil:
							acks[text] = ack{out[0].Entry.Seq, out[0].Commit.String()}
						case errs.Is(err, "CONFLICT"):
							conflicts++
						default:
							mu.Unlock()
							errc <- fmt.Errorf("%s: %v", text, err)
							return
						}
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			close(errc)
			for err := range errc {
				t.Fatal(err)
			}
			entries := readChain(t, s.bare)
			checkChainLinks(t, entries)
			seen := map[string]int{}
			for _, e := range entries[1:] {
				seen[e.Text]++
				a, ok := acks[e.Text]
				if !ok {
					t.Fatalf("entry %d %q is on the server but was not acknowledged", e.Seq, e.Text)
				}
				if a.seq != e.Seq || a.commit != e.Commit {
					t.Fatalf("%q acknowledged as seq %d %s, on the server as seq %d %s", e.Text, a.seq, a.commit, e.Seq, e.Commit)
				}
			}
			for text := range acks {
				if seen[text] != 1 {
					t.Fatalf("acknowledged %q is on the server %d times", text, seen[text])
				}
			}
			if len(acks)+conflicts != writers*each {
				t.Fatalf("%d acknowledged + %d CONFLICT of %d", len(acks), conflicts, writers*each)
			}
			t.Logf("%s: %d writers x %d appends: %d acknowledged, %d CONFLICT", name, writers, each, len(acks), conflicts)
		})
	}
}

// TestRemoteRewriteDetected: on a server that does not check pushes, someone
// rewrites the ledger. A clone that verified the old history refuses to build
// on the new one: FORK-DETECTED for a fork, ROLLBACK-DETECTED for a rollback
// (exit class 3), and nothing is pushed.
func TestRemoteRewriteDetected(t *testing.T) {
	for _, kind := range gitserver.Kinds {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			s := newRemoteSite(t, kind, false)
			a := s.clone("a")
			s.tally(a, "A", "--remote", "origin", "init")
			for i := 0; i < 3; i++ {
				s.tally(a, "A", "--remote", "origin", "note", fmt.Sprintf("n%d", i))
			}
			known := s.serverTip()
			// rewrite force-pushes commit as the server's ledger from dir,
			// past no hook: what a careless admin or a compromised server does.
			rewrite := func(dir, commit string) {
				t.Helper()
				testrepo.Git(t, dir, "push", "-q", "-f", "origin", commit+":"+ledgerRef)
			}
			check := func(code string) {
				t.Helper()
				server := s.serverTip()
				l := openLedger(t, a)
				_, err := l.AppendRemote("origin", "A", []ledger.BuildFunc{noteDraft("on top")})
				if remoteCode(err) != code || errs.From(err).Class() != errs.Integrity {
					t.Fatalf("AppendRemote on a rewritten remote: %v, want %s", err, code)
				}
				if _, err := l.FetchRemote("origin"); remoteCode(err) != code {
					t.Fatalf("FetchRemote: %v, want %s", err, code)
				}
				r := testrepo.Run(t, a, "A", nil, "--json", "--remote", "origin", "status")
				if r.Code != 3 || r.ErrorCode() != code {
					t.Fatalf("tally status on a rewritten remote: exit %d %s", r.Code, r.Stdout)
				}
				if s.serverTip() != server {
					t.Fatalf("the server moved")
				}
			}
			// A fork: the last entry replaced by another one.
			x := s.clone("forker")
			testrepo.Git(t, x, "fetch", "-q", "origin", "+refs/tally/ledger:refs/tally/ledger")
			testrepo.Git(t, x, "update-ref", ledgerRef, known+"^")
			if r := testrepo.Run(t, x, "B", nil, "--json", "note", "another history"); r.Code != 0 {
				t.Fatalf("note: %s", r.Stdout)
			}
			rewrite(x, tip(t, x))
			check("FORK-DETECTED")
			// A rollback: an ancestor of what was verified.
			rewrite(a, known+"~2")
			check("ROLLBACK-DETECTED")
			// The ledger deleted from the remote: a rollback to nothing.
			testrepo.Git(t, a, "push", "-q", "origin", ":"+ledgerRef)
			if _, err := openLedger(t, a).FetchRemote("origin"); remoteCode(err) != "ROLLBACK-DETECTED" {
				t.Fatalf("FetchRemote of a deleted remote ledger: %v, want ROLLBACK-DETECTED", err)
			}
			if r := testrepo.Run(t, a, "A", nil, "--json", "--remote", "origin", "note", "x"); r.Code != 3 || r.ErrorCode() != "ROLLBACK-DETECTED" {
				t.Fatalf("tally note on a deleted remote ledger: exit %d %s", r.Code, r.Stdout)
			}
			// The original history back: the clone carries on.
			rewrite(a, known)
			l := openLedger(t, a)
			if _, err := l.AppendRemote("origin", "A", []ledger.BuildFunc{noteDraft("carry on")}); err != nil {
				t.Fatalf("AppendRemote on the restored remote: %v", err)
			}
		})
	}
}

// remoteCode is the tally error code of err ("" for none).
func remoteCode(err error) string {
	if err == nil {
		return ""
	}
	return string(errs.From(err).Code)
}

// TestRemoteLostAcknowledgement: a push that the server applied but whose
// acknowledgement never reached the client (the connection dropped after the
// ref moved), after which another writer appended on top before the client
// listed the ref. The client must recognise its entry in the server's
// history instead of concluding it lost the race and appending it again.
//
// The fault is injected in the real server with a reference-transaction
// hook: once armed, when refs/tally/ledger has been committed it appends one
// entry itself (tally, on the bare repository) and kills its receive-pack
// before the report reaches the client.
func TestRemoteLostAcknowledgement(t *testing.T) {
	for _, kind := range gitserver.Kinds {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			s := newRemoteSite(t, kind, true)
			t.Cleanup(func() { waitMaintenance(t, s.bare) })
			arm := filepath.Join(s.bare, "inject-armed")
			hook := fmt.Sprintf(`#!/bin/sh
[ "$1" = committed ] || exit 0
grep -q ' refs/tally/ledger$' || exit 0
mv '%[1]s' '%[1]s.used' 2>/dev/null || exit 0
unset GIT_DIR GIT_QUARANTINE_PATH GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES
'%[2]s' -C '%[3]s' --actor server note 'appended on the server' >'%[1]s.log' 2>&1
kill -9 $PPID
`, arm, testrepo.Tally(t), s.bare)
			if err := os.WriteFile(filepath.Join(s.bare, "hooks", "reference-transaction"), []byte(hook), 0o755); err != nil {
				t.Fatal(err)
			}
			a := s.clone("a")
			s.tally(a, "A", "--remote", "origin", "init")
			s.tally(a, "A", "--remote", "origin", "plan", remotePlanFile(t, "w", "x"))

			// A note: appended once, whatever the transport said.
			if err := os.WriteFile(arm, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			l := openLedger(t, a)
			out, err := l.AppendRemote("origin", "A", []ledger.BuildFunc{noteDraft("exactly once")})
			if _, err := os.Stat(arm + ".used"); err != nil {
				t.Fatalf("the fault was not injected: %v", err)
			}
			n := 0
			for _, e := range readChain(t, s.bare) {
				if e.Text == "exactly once" {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("the note is on the server %d times (AppendRemote: %v)", n, err)
			}
			if err != nil || out[0].Entry.Seq != 2 {
				t.Fatalf("AppendRemote: %v", err)
			}

			// A claim: the agent is told it holds the lease it holds.
			os.Remove(arm + ".used")
			if err := os.WriteFile(arm, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			r := testrepo.Run(t, a, "A", nil, "--json", "--remote", "origin", "claim", "w/x")
			if _, err := os.Stat(arm + ".used"); err != nil {
				t.Fatalf("the fault was not injected: %v", err)
			}
			if r.Code != 0 {
				t.Fatalf("claim whose acknowledgement was lost: exit %d %s", r.Code, r.Stdout)
			}
			claims := 0
			for _, e := range readChain(t, s.bare) {
				if e.Kind == "claim" {
					claims++
				}
			}
			if claims != 1 {
				t.Fatalf("the server holds %d claims", claims)
			}
			verifyOK(t, a, true)
		})
	}
}

// TestRemoteDroppedPush: the connection to the server drops while the push
// is in flight, before the server moved the ref (its receive-pack dies in
// pre-receive). The append must not be reported as done unless the entry is
// on the server: either it is retried and lands, or the caller gets an
// error. Afterwards the clone keeps working with the server.
//
// The fault is injected in the real server: a pre-receive hook chained
// before tally's (pre-receive.tally-orig) kills its receive-pack once armed.
func TestRemoteDroppedPush(t *testing.T) {
	for _, kind := range gitserver.Kinds {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			s := newRemoteSite(t, kind, true)
			arm := filepath.Join(s.bare, "drop-armed")
			hook := fmt.Sprintf(`#!/bin/sh
cat >/dev/null
mv '%[1]s' '%[1]s.used' 2>/dev/null || exit 0
kill -9 "$(cut -d' ' -f4 /proc/$PPID/stat)"
`, arm)
			if err := os.WriteFile(filepath.Join(s.bare, "hooks", "pre-receive.tally-orig"), []byte(hook), 0o755); err != nil {
				t.Fatal(err)
			}
			a := s.clone("a")
			s.tally(a, "A", "--remote", "origin", "init")
			for i := 0; i < 3; i++ {
				if err := os.WriteFile(arm, nil, 0o644); err != nil {
					t.Fatal(err)
				}
				text := fmt.Sprintf("dropped-%d", i)
				before := s.serverTip()
				l := openLedger(t, a)
				out, err := l.AppendRemote("origin", "A", []ledger.BuildFunc{noteDraft(text)})
				if _, serr := os.Stat(arm + ".used"); serr != nil {
					t.Fatalf("the fault was not injected: %v", serr)
				}
				os.Remove(arm + ".used")
				onServer := 0
				for _, e := range readChain(t, s.bare) {
					if e.Text == text {
						onServer++
					}
				}
				switch {
				case err == nil && (onServer != 1 || out[0].Commit.String() != s.serverTip()):
					t.Fatalf("%s acknowledged as %s, but the server holds it %d times (server at %s, was %s)",
						text, out[0].Commit, onServer, s.serverTip(), before)
				case err != nil && onServer != 0:
					t.Fatalf("%s: error %v, but the server holds it %d times", text, err, onServer)
				case err != nil:
					t.Logf("%s: %v", text, err)
				}
				// The clone carries on.
				if _, err := l.AppendRemote("origin", "A", []ledger.BuildFunc{noteDraft(text + " after")}); err != nil {
					t.Fatalf("append after a dropped push: %v", err)
				}
			}
			verifyOK(t, a, true)
		})
	}
}

// Remote appends leave a pack per attempt, like local ones, and start the same
// background compaction: the clone's pack count stays bounded.
func TestRemoteAppendsCompact(t *testing.T) {
	s := newRemoteSite(t, gitserver.GitDaemon, true)
	a := s.clone("a")
	s.tally(a, "A", "--remote", "origin", "init")
	l := openLedger(t, a)
	const appends = 40
	for i := range appends {
		if _, err := l.AppendRemote("origin", "A", []ledger.BuildFunc{noteDraft(fmt.Sprintf("n%d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	l.WaitMaintenance()
	packs, _ := filepath.Glob(filepath.Join(a, ".git", "objects", "pack", "*.pack"))
	if len(packs) > 20 {
		t.Fatalf("%d packs after %d remote appends", len(packs), appends)
	}
	verifyOK(t, a, true)
}
