package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/tally-dev/tally"
	"github.com/tally-dev/tally/internal/gitserver"
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
}
