package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tally-dev/tally/internal/testrepo"
)

// TestUnknownCommands: an unknown command or subcommand is USAGE (exit 2,
// not retryable) naming it, with cobra's suggestion where one is close; a
// command group without arguments prints its help and exits 0.
func TestUnknownCommands(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args    []string
		mention string
	}{
		{[]string{"bogus"}, `unknown command "bogus" for "tally"`},
		{[]string{"polcy"}, "did you mean policy?"},
		{[]string{"policy", "bogus"}, `unknown command "bogus" for "tally policy"`},
		{[]string{"policy", "shw"}, "show"},
		{[]string{"keys", "bogus", "x"}, `"tally keys"`},
	} {
		res := testrepo.Run(t, dir, "", nil, append([]string{"--json"}, c.args...)...)
		msg, _ := obj(t, res.JSON, "error")["message"].(string)
		if res.Code != 2 || res.ErrorCode() != "USAGE" || !strings.Contains(msg, c.mention) {
			t.Errorf("tally %v: exit %d %s, want USAGE mentioning %q", c.args, res.Code, res.Stdout, c.mention)
		}
	}
	if res := testrepo.Run(t, dir, "", nil, "policy"); res.Code != 0 || !strings.Contains(res.Stdout, "Available Commands") {
		t.Errorf("tally policy: exit %d %q, want its help", res.Code, res.Stdout)
	}
}

// TestLogFilters: log keeps the entries of one actor, kind or cell, or
// since a time (entry time; the walk stops at the first older entry), and
// combines them; an empty selection is an empty list.
func TestLogFilters(t *testing.T) {
	r := newRepo(t)
	r.at(0).ok("A", "init")
	r.ok("A", "plan", r.file("plan.json", `{"wave":"w","cells":[{"id":"a"},{"id":"b"}]}`))
	r.at(time.Minute).ok("A", "claim", "w/a")
	r.at(2*time.Minute).ok("B", "claim", "w/b")
	r.at(3*time.Minute).ok("B", "note", "about w/b")
	r.at(4*time.Minute).ok("A", "release", "w/a", "--epoch", "1")
	seqs := func(args ...string) string {
		t.Helper()
		var out []string
		for _, e := range arr(t, r.ok("C", append([]string{"log"}, args...)...), "entries") {
			out = append(out, fmt.Sprint(e.(map[string]any)["seq"]))
		}
		return strings.Join(out, ",")
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--actor", "B"}, "4,3"},
		{[]string{"--kind", "claim"}, "3,2"},
		{[]string{"--cell", "w/a"}, "5,2"},
		{[]string{"--since", tsAt(2 * time.Minute)}, "5,4,3"},
		{[]string{"--actor", "A", "--since", tsAt(90 * time.Second)}, "5"},
		{[]string{"--kind", "claim", "-n", "1"}, "3"},
		{[]string{"--actor", "nobody"}, ""},
	} {
		if got := seqs(c.args...); got != c.want {
			t.Errorf("log %v: seqs %q, want %q", c.args, got, c.want)
		}
	}
	r.refuse(2, "USAGE", "C", "log", "--cell", "no-slash")
	r.refuse(2, "USAGE", "C", "log", "--since", "yesterday")
}
