package ledger_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/internal/testrepo"
)

// Appends beside `git gc --prune=now --aggressive` run in a loop: git prunes
// every "tmp_*" file in objects/pack and deletes unreachable packed objects,
// so an append must neither name its temporaries as git does nor leave its
// pack unprotected between publishing it and moving the ref. Every append is
// acknowledged (exit 0) or cleanly retryable (exit 1 with a code); none
// acknowledged is lost; verify --full passes and git fsck is clean.
func TestAppendsBesideGitGCPruneNow(t *testing.T) {
	t.Parallel()
	const procs, perProc = 4, 75 // 300 appends
	dir := initRepo(t)
	log := newAppendLog()

	ctx, stop := context.WithCancel(context.Background())
	gcDone := make(chan int)
	go func() {
		runs := 0
		for ctx.Err() == nil {
			cmd := exec.CommandContext(ctx, "git", "gc", "--prune=now", "--aggressive", "--quiet")
			cmd.Dir, cmd.Env = dir, testrepo.Env()
			if out, err := cmd.CombinedOutput(); err != nil && ctx.Err() == nil {
				t.Errorf("git gc: %v %s", err, out)
			}
			runs++
		}
		gcDone <- runs
	}()

	var mu sync.Mutex
	var wg sync.WaitGroup
	retryable := 0
	for p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perProc {
				text := fmt.Sprintf("gc-p%d-%d", p, i)
				mu.Lock()
				log.try(text)
				mu.Unlock()
				cmd := tallyCmd(t, dir, fmt.Sprintf("agent-%d", p), "--json", "note", text)
				var out, stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &stderr
				err := cmd.Run()
				code := cmd.ProcessState.ExitCode()
				mu.Lock()
				switch a, ok := parseAck(text, out.Bytes()); {
				case code == 0 && ok:
					log.ok("tally", a)
				case code == 1 && retryableRefusal(out.Bytes()):
					retryable++
				default:
					t.Errorf("append %s beside git gc: exit %d (%v) %s %s", text, code, err, out.String(), stderr.String())
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	stop()
	runs := <-gcDone
	if runs < 2 {
		t.Errorf("git gc ran %d times beside the appends: the test did not overlap them", runs)
	}
	t.Logf("%d appends acknowledged, %d retryable refusals, %d git gc runs", len(log.acks), retryable, runs)
	checkAppends(t, dir, log, nil)
	verifyOK(t, dir, true)
	fsck(t, dir)
}

// retryableRefusal reports whether out is a --json refusal with a code that
// says retrying can succeed.
func retryableRefusal(out []byte) bool {
	var r struct {
		Error struct {
			Code      string `json:"code"`
			Retryable bool   `json:"retryable"`
		} `json:"error"`
	}
	return json.Unmarshal(out, &r) == nil && r.Error.Code != "" && r.Error.Retryable
}

// What a killed append leaves in objects/pack — its temporaries and its
// .keep — is removed by the next compaction (`tally gc`) once old, unless a
// live process still holds it (flock); git's own temporaries and .keep files
// that are not tally's are left alone.
func TestStalePackTempsRemoved(t *testing.T) {
	t.Parallel()
	dir := initRepo(t)
	packDir := filepath.Join(gitDir(t, dir), "objects", "pack")
	old := time.Now().Add(-time.Hour)
	file := func(name, content string, age time.Time) string {
		p := filepath.Join(packDir, name)
		if err := os.WriteFile(p, []byte(content), 0o444); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, age, age); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const tallyKeep = "tally: protects a pack until its ref is updated\n"
	gone := []string{
		file("tally-tmp-pack-123", "PACK...", old),
		file("tally-tmp-idx-123", "\377tOc...", old),
		file("pack-0123456789012345678901234567890123456789.keep", tallyKeep, old),
	}
	kept := []string{
		file("tally-tmp-pack-456", "PACK...", time.Now()),                                       // young
		file("tmp_pack_789", "PACK...", old),                                                    // git's
		file("pack-1123456789012345678901234567890123456789.keep", "receive-pack 42 on h", old), // git's
	}
	live := file("tally-tmp-pack-999", "PACK...", old) // a writer that is still running
	lock, err := gitstore.LockFile(live)               // the lock a writer holds on its temporary pack
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	kept = append(kept, live)

	r := testrepo.Run(t, dir, "gc", nil, "--json", "gc")
	if r.Code != 0 {
		t.Fatalf("tally gc: exit %d %s %s", r.Code, r.Stdout, r.Stderr)
	}
	if n, _ := r.JSON["stale"].(float64); int(n) != len(gone) {
		t.Errorf("tally gc reports %v stale files removed, want %d", r.JSON["stale"], len(gone))
	}
	for _, p := range gone {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left by a killed writer remains after tally gc (%v)", filepath.Base(p), err)
		}
	}
	for _, p := range kept {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s removed by tally gc: %v", filepath.Base(p), err)
		}
	}
	verifyOK(t, dir, true)
}

// The pack an append publishes is protected from `git gc --prune=now` until
// the ref points at it: strace holds the append just before it renames the
// ref's lock over the ref (its pack already in place), git gc runs then —
// its repack -a -d deletes the packs it listed, keeping only what refs
// reach — and afterwards the acknowledged entry's objects must be there.
func TestGitGCBetweenPackAndRef(t *testing.T) {
	t.Parallel()
	dir := initRepo(t)
	gd := gitDir(t, dir)
	// Held: the lock holds the new id and no temporary pack file is left
	// (the pack is published).
	out := holdBesideGC(t, dir, "held", func([]byte) bool {
		temps, _ := filepath.Glob(filepath.Join(gd, "objects", "pack", "*tmp*"))
		return len(temps) == 0
	}, "note", "held")
	a, ok := parseAck("held", out)
	if !ok {
		t.Fatalf("the held append was not acknowledged: %s", out)
	}
	if got := tip(t, dir); got != a.commit {
		t.Fatalf("tip %s, acknowledged %s", got, a.commit)
	}
	fsck(t, dir)
	verifyOK(t, dir, true)
}

// holdBesideGC runs `tally --json args...` as actor in dir under strace,
// which delays its rename of the ledger's ref lock over the ref by 5 s; once
// the lock holds a new id and held says so of the lock's content, it runs
// `git gc --prune=now` in dir. The command must then succeed; its stdout is
// returned.
func holdBesideGC(t *testing.T, dir, actor string, held func(lock []byte) bool, args ...string) []byte {
	t.Helper()
	strace := testrepo.Strace(t)
	lock := filepath.Join(gitDir(t, dir), filepath.FromSlash(ledgerRef)+".lock")
	renames := "rename,renameat,renameat2"
	cmd := exec.Command(strace, append([]string{"-f", "-qq", "-o", "/dev/null", "-P", lock,
		"-e", "trace=" + renames, "-e", "inject=" + renames + ":delay_enter=5000000",
		testrepo.Tally(t), "-C", dir, "--json"}, args...)...)
	cmd.Env = testrepo.Env("TALLY_ACTOR=" + actor)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	isHeld := func() bool {
		b, err := os.ReadFile(lock)
		return err == nil && len(b) == 41 && held(b)
	}
	for deadline := time.Now().Add(30 * time.Second); !isHeld(); {
		select {
		case err := <-exited:
			t.Fatalf("tally %v ended before it was held: %v %s %s", args, err, out.String(), stderr.String())
		case <-time.After(time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("tally %v was never held before its ref rename", args)
		}
	}
	gitIn(t, dir, nil, "gc", "--prune=now", "--quiet")
	if err := <-exited; err != nil {
		t.Fatalf("the held tally %v: %v %s %s", args, err, out.String(), stderr.String())
	}
	return out.Bytes()
}
