package main

// The first contact's fetch and the haves it offers (FORMAT.md §9a), seen
// in git's own trace of the fetch.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// traceEnv has git write trace2 events to file, down to the negotiation
// rounds (nesting 3; git's default for the event target stops at 2).
func traceEnv(file string) []string {
	return []string{"GIT_TRACE2_EVENT=" + file, "GIT_TRACE2_EVENT_NESTING=5"}
}

// havesOffered reads a GIT_TRACE2_EVENT file and returns the haves each
// negotiation round of the traced fetches offered the server.
func havesOffered(t *testing.T, trace string) []int {
	t.Helper()
	b, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, line := range strings.Split(string(b), "\n") {
		var ev struct {
			Event, Key string
			Value      json.RawMessage // a number for git's trace2_data_intmax
		}
		if json.Unmarshal([]byte(line), &ev) != nil || ev.Event != "data" || ev.Key != "haves_added" {
			continue
		}
		n, err := strconv.Atoi(strings.Trim(string(ev.Value), `"`))
		if err != nil {
			t.Fatalf("trace2 haves_added %s", ev.Value)
		}
		out = append(out, n)
	}
	return out
}

// The first contact's fetch offers the server none of the clone's commits
// (FORMAT.md §9a): the clone has nothing of the ledger, and each commit it
// offered would make the server walk the wanted ledger history down to that
// commit's date before giving up on it. The control: git's own fetch of the
// same ref in a clone like it offers the clone's main. What the clone then
// fetched still verifies from the checkpoint.
func TestFirstContactOffersNoHaves(t *testing.T) {
	s := newFCServer(t, 6, 0)
	dir := s.trusting("fresh", s.vkey)
	trace := filepath.Join(t.TempDir(), "tally.trace2")
	st := s.ok(dir, "agent", traceEnv(trace), "--remote", "origin", "status")
	if from, _ := st["verified"].(map[string]any)["from"].(map[string]any); from == nil || from["checkpoint_size"] != float64(s.cpSize) {
		t.Fatalf("first status verified %v, want from the checkpoint of %d entries", st["verified"], s.cpSize)
	}
	rounds := havesOffered(t, trace)
	if len(rounds) == 0 {
		t.Fatal("no negotiation traced: the first contact fetched nothing?")
	}
	for i, n := range rounds {
		if n != 0 {
			t.Fatalf("negotiation round %d of the first contact offered %d haves, want none (rounds %v)", i+1, n, rounds)
		}
	}

	control := s.clone("control")
	gitTrace := filepath.Join(t.TempDir(), "git.trace2")
	if _, err := netGit(control, traceEnv(gitTrace), "fetch", "-q", "--depth=1", "origin",
		"refs/tally/ledger:refs/remotes/origin/tally/ledger"); err != nil {
		t.Fatal(err)
	}
	if got := havesOffered(t, gitTrace); len(got) == 0 || got[0] == 0 {
		t.Fatalf("git's own fetch offered haves %v: the control cannot tell", got)
	}
}
