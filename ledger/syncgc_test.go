package ledger_test

import (
	"path/filepath"
	"testing"

	"github.com/tally-dev/tally/internal/gitserver"
	"github.com/tally-dev/tally/ledger"
)

// A sync that rebuilt local entries on a moved remote tip has pushed them
// but not yet moved its local ref when `git gc --prune=now` runs in the
// clone: the rebuilt entries' pack, which no ref reaches yet, must survive
// it, so that the local ledger then points at objects it has. The sync is
// held with strace just before it renames the ledger's ref lock into place.
func TestGitGCBetweenSyncPushAndRef(t *testing.T) {
	t.Parallel()
	s, b, lb := movedWhileOffline(t)
	if _, err := lb.AppendBatch("B", []ledger.BuildFunc{noteDraft("offline 1"), noteDraft("offline 2")}); err != nil {
		t.Fatal(err)
	}
	lb.WaitMaintenance()
	lb.Close()
	pushedBesideGC(t, s, b, "sync", "origin")
}

// movedWhileOffline makes a server ledger, a clone b that synced it, and
// then another entry on the server that b has not seen; it returns b and
// b's ledger, for entries of its own that a sync must rebuild.
func movedWhileOffline(t *testing.T) (*remoteSite, string, *ledger.Ledger) {
	t.Helper()
	s := newRemoteSite(t, gitserver.GitDaemon, true)
	a, b := s.clone("a"), s.clone("b")
	s.tally(a, "A", "remote", "set", "origin")
	s.tally(a, "A", "init")
	remoteSyncIn(t, b)
	s.tally(a, "A", "note", "the remote moves on")
	return s, b, openLedger(t, b)
}

// The same for a remote append: pushed, not yet fast-forwarded locally.
func TestGitGCBetweenRemoteAppendAndRef(t *testing.T) {
	t.Parallel()
	s := newRemoteSite(t, gitserver.GitDaemon, true)
	a, b := s.clone("a"), s.clone("b")
	s.tally(a, "A", "remote", "set", "origin")
	s.tally(a, "A", "init")
	s.tally(b, "B", "remote", "set", "origin")
	s.tally(b, "B", "note", "first")
	pushedBesideGC(t, s, b, "note", "held")
}

// pushedBesideGC runs `tally args...` in the clone dir, held (holdBesideGC)
// once the ledger's ref lock names the server's tip (the push is done), and
// requires that it succeeds, leaves no .keep behind, and that the local
// ledger is then the server's, whole.
func pushedBesideGC(t *testing.T, s *remoteSite, dir string, args ...string) {
	t.Helper()
	holdBesideGC(t, dir, "B", func(lock []byte) bool { return string(lock[:40]) == s.serverTip() }, args...)
	if keeps, _ := filepath.Glob(filepath.Join(gitDir(t, dir), "objects", "pack", "*.keep")); len(keeps) != 0 {
		t.Errorf("tally %v left %v", args, keeps)
	}
	if got, want := tip(t, dir), s.serverTip(); got != want {
		t.Fatalf("local tip %s, server %s", got, want)
	}
	fsck(t, dir)
	verifyOK(t, dir, true)
}
