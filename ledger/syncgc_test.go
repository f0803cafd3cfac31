package ledger_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/tally-dev/tally/internal/gitserver"
	"github.com/tally-dev/tally/internal/testrepo"
	"github.com/tally-dev/tally/ledger"
)

// A sync that rebuilt local entries on a moved remote tip has pushed them
// but not yet moved its local ref when `git gc --prune=now` runs in the
// clone: the rebuilt entries' pack, which no ref reaches yet, must survive
// it, so that the local ledger then points at objects it has. The sync is
// held with strace just before it renames the ledger's ref lock into place.
func TestGitGCBetweenSyncPushAndRef(t *testing.T) {
	t.Parallel()
	s := newRemoteSite(t, gitserver.GitDaemon, true)
	a, b := s.clone("a"), s.clone("b")
	s.tally(a, "A", "remote", "set", "origin")
	s.tally(a, "A", "init")
	remoteSyncIn(t, b)
	s.tally(a, "A", "note", "the remote moves on")
	lb := openLedger(t, b)
	if _, err := lb.AppendBatch("B", []ledger.BuildFunc{noteDraft("offline 1"), noteDraft("offline 2")}); err != nil {
		t.Fatal(err)
	}
	lb.WaitMaintenance()
	lb.Close()
	heldBesideGC(t, s, b, "sync", "origin")
	if got, want := tip(t, b), s.serverTip(); got != want {
		t.Fatalf("local tip %s, server %s", got, want)
	}
	fsck(t, b)
	verifyOK(t, b, true)
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
	heldBesideGC(t, s, b, "note", "held")
	if got, want := tip(t, b), s.serverTip(); got != want {
		t.Fatalf("local tip %s, server %s", got, want)
	}
	fsck(t, b)
	verifyOK(t, b, true)
}

// heldBesideGC runs `tally args...` in the clone dir under strace, which
// holds it just before it renames the local ledger's ref lock into place
// once the lock names the server's tip (the push is done); meanwhile it runs
// `git gc --prune=now` in dir. The command must then succeed and leave no
// .keep behind.
func heldBesideGC(t *testing.T, s *remoteSite, dir string, args ...string) {
	t.Helper()
	strace := testrepo.Strace(t)
	gd := gitDir(t, dir)
	lock := filepath.Join(gd, filepath.FromSlash(ledgerRef)+".lock")
	renames := "rename,renameat,renameat2"
	cmd := exec.Command(strace, append([]string{"-f", "-qq", "-o", "/dev/null", "-P", lock,
		"-e", "trace=" + renames, "-e", "inject=" + renames + ":delay_enter=5000000",
		testrepo.Tally(t), "-C", dir, "--json"}, args...)...)
	cmd.Env = testrepo.Env("TALLY_ACTOR=B")
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	held := func() bool {
		lk, err := os.ReadFile(lock)
		return err == nil && len(lk) == 41 && string(lk[:40]) == s.serverTip()
	}
	for deadline := time.Now().Add(30 * time.Second); !held(); {
		select {
		case err := <-exited:
			t.Fatalf("tally %v ended before it was held: %v %s %s", args, err, out.String(), stderr.String())
		case <-time.After(time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("tally %v was never held before its local ref rename", args)
		}
	}
	gitIn(t, dir, nil, "gc", "--prune=now", "--quiet")
	if err := <-exited; err != nil {
		t.Fatalf("the held tally %v: %v %s %s", args, err, out.String(), stderr.String())
	}
	if keeps, _ := filepath.Glob(filepath.Join(gd, "objects", "pack", "*.keep")); len(keeps) != 0 {
		t.Errorf("tally %v left %v", args, keeps)
	}
}
