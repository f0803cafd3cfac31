package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/tally-dev/tally/internal/testrepo"
)

// TestDiskFull: an append on a full file system is IO-ERROR, exit 2 (the
// machine needs fixing; retrying unchanged will not help, and nothing is
// corrupt), the ledger does not move and git fsck stays clean; once space is
// free the same append succeeds. The file system is a real, small tmpfs.
func TestDiskFull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	mnt := filepath.Join(t.TempDir(), "small")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", mnt).Run() })
	dir := filepath.Join(mnt, "repo")
	testrepo.Git(t, mnt, "init", "-q", dir)
	testrepo.Git(t, dir, "config", "gc.auto", "0")
	r := &repo{t: t, dir: dir, now: tsAt(0)}
	r.ok("A", "init")
	before := r.tip()

	filler := filepath.Join(mnt, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling the disk: %v", err)
			}
			break
		}
	}
	f.Close()

	if e := r.refuse(2, "IO-ERROR", "A", "note", "no room"); e["errno"] != "ENOSPC" {
		t.Fatalf("IO-ERROR without errno ENOSPC: %v", e)
	}
	if got := r.tip(); got != before {
		t.Fatalf("the ledger moved on a full disk: %s -> %s", before, got)
	}
	testrepo.Git(t, dir, "fsck", "--no-dangling")

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	r.ok("A", "note", "room again")
	if r.tip() == before {
		t.Fatal("the append after freeing space did not land")
	}
	testrepo.Git(t, dir, "fsck", "--no-dangling")
}
