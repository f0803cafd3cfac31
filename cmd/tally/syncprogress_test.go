package main

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tally-dev/tally"
	"github.com/tally-dev/tally/internal/gitserver"
	"github.com/tally-dev/tally/internal/testrepo"
)

// sync on a terminal shows git's own push progress (its object counts) and
// tally's own steps (the verify of what it fetched); with --json, or with
// stderr piped, it shows nothing.
func TestSyncProgressOnTerminal(t *testing.T) {
	const notes = 300
	c := newNetCluster(t, gitserver.GitDaemon)
	a := c.clone("a")
	c.ok(a, "alice", nil, "init")
	cl, err := tally.Open(a, tally.Options{Actor: "alice", Local: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range notes {
		if _, err := cl.Note("offline " + strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	cl.L.WaitMaintenance()
	cl.Close()
	res := onTerminal(t, a, false, true, nil, "sync", "origin")
	if res.code != 0 || !strings.Contains(res.stdout, "origin: pushed, 301 entries") {
		t.Fatalf("first sync on a terminal: exit %d\n%s%s", res.code, res.stdout, res.term)
	}
	if !strings.Contains(res.term, "Enumerating objects: ") || !strings.Contains(res.term, "Writing objects: 100% (") {
		t.Errorf("first sync on a terminal: no push progress on stderr: %q", res.term)
	}
	for _, name := range []string{"b", "c"} {
		dir := c.clone(name)
		res := onTerminal(t, dir, false, true, nil, "sync", "origin")
		if m := progressLine("verify", "entries").FindStringSubmatch(res.term); res.code != 0 || m == nil || m[1] != strconv.Itoa(notes+1) {
			t.Fatalf("sync of a new clone on a terminal: exit %d, no verify progress of %d entries: %q%s", res.code, notes+1, res.term, res.stdout)
		}
	}
	// Another local entry to push each time; none shows anything.
	for _, how := range []struct {
		flag   string
		termed bool
	}{{"--json", true}, {"--quiet", true}, {"", false}} {
		c.ok(a, "alice", nil, "--local", "note", "more")
		args := []string{"sync", "origin"}
		if how.flag != "" {
			args = append(args, how.flag)
		}
		res := onTerminal(t, a, !how.termed, how.termed, nil, args...)
		if res.code != 0 || (how.termed && res.term != "") || (!how.termed && res.stderr != "") {
			t.Errorf("sync %q (stderr on a terminal: %v): exit %d, stderr %q%q", how.flag, how.termed, res.code, res.term, res.stderr)
		}
	}
	// A remote append pushes a few objects: it shows nothing.
	if res := onTerminal(t, a, false, true, nil, "--remote", "origin", "note", "small"); res.code != 0 || res.term != "" {
		t.Errorf("remote note on a terminal: exit %d, stderr %q%s", res.code, res.term, res.stdout)
	}
	// A push the server's hook refuses, with progress on: the error says
	// what the server said, and none of git's counters.
	gitserver.NewBare(t, filepath.Dir(c.bare), "future.git")
	testrepo.Git(t, a, "remote", "add", "future", strings.TrimSuffix(c.url, "/shared.git")+"/future.git")
	ahead := time.Now().Add(2 * time.Hour).UTC().Format(time.RFC3339)
	c.ok(a, "alice", []string{"TALLY_NOW=" + ahead}, "--local", "note", "from the future")
	res = onTerminal(t, a, false, true, nil, "sync", "future")
	_, msg, _ := strings.Cut(res.term, "REMOTE-REJECTED")
	if res.code != 2 || !strings.Contains(res.term, "Writing objects: ") || !strings.Contains(msg, "ahead of the server clock") ||
		strings.Contains(msg, "objects: ") || strings.Contains(msg, "Total ") {
		t.Errorf("refused sync on a terminal: exit %d, want 2, the push progress, then REMOTE-REJECTED with the server's words only: %q", res.code, res.term)
	}
}

// The first sync of a local ledger to an empty remote asks the remote once
// (the fetch that finds no ledger there) and pushes once: nothing is
// fetched after the push, not even notes (the clone has none to send).
func TestFirstSyncConnections(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	bare := gitserver.NewBare(t, root, "shared.git")
	log := filepath.Join(t.TempDir(), "services")
	hook := filepath.Join(t.TempDir(), "access-hook")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\necho \"$1\" >>'"+log+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	url := gitserver.DaemonWith(t, root, gitserver.DaemonOptions{AccessHook: hook}) + "/shared.git"
	c := &netCluster{t: t, kind: gitserver.GitDaemon, bare: bare, url: url, bin: testrepo.Tally(t)}
	dir := c.clone("a")
	c.ok(dir, "alice", nil, "init")
	c.ok(dir, "alice", nil, "note", "offline")
	before, _ := os.ReadFile(log)
	if p := c.ok(dir, "alice", nil, "sync", "origin"); p["action"] != "pushed" {
		t.Fatalf("sync: %v", p)
	}
	after, _ := os.ReadFile(log)
	if got := strings.Fields(string(after[len(before):])); !slices.Equal(got, []string{"upload-pack", "receive-pack"}) {
		t.Errorf("the first sync asked the server for %v, want one fetch and one push", got)
	}
	if got := c.serverTip(); got != testrepo.Git(t, dir, "rev-parse", "refs/tally/ledger") {
		t.Errorf("server ledger %s is not the local one", got)
	}
}
