package main

import (
	"strings"
	"testing"
	"time"

	"github.com/tally-dev/tally/internal/testrepo"
)

// TestShowHistoryLines: `show` prints a cell's history as one readable line
// per entry — seq, time, actor, kind and what the entry says (mode, TTL and
// holder process of a claim, epochs, the reason of a failure, the commit,
// changes and evidence of a receipt) — never as raw JSON bodies, and a
// failure reason carrying terminal escapes and a line feed is shown inert,
// on its own line. --json keeps the bodies as they are stored.
func TestShowHistoryLines(t *testing.T) {
	r := newRepo(t).at(0)
	r.ok("A", "init")
	r.ok("A", "plan", r.file("plan.json", `{"wave":"w","cells":[{"id":"c","paths":["db"]}]}`))
	r.at(time.Second)
	r.ok("A", "claim", "w/c", "--ttl", "10m", "--pid", "4242")
	r.at(2 * time.Second)
	r.ok("A", "renew", "w/c", "--epoch", "1", "--ttl", "15m")
	reason := "flaky\x1b[31m red\nforged line"
	r.at(3 * time.Second)
	r.ok("A", "fail", "w/c", "--epoch", "1", "--reason", reason)
	r.at(4 * time.Second)
	r.ok("A", "requeue", "w/c")
	r.at(5 * time.Second)
	r.ok("B", "claim", "w/c")
	head := r.commit("schema", "db/x.sql")
	r.at(6 * time.Second)
	r.ok("B", "done", "w/c", "--epoch", "2")

	res := testrepo.Run(t, r.dir, "A", r.env(), "show", "w/c")
	if res.Code != 0 {
		t.Fatalf("show: exit %d %s", res.Code, res.Stderr)
	}
	lines := strings.Split(strings.TrimRight(res.Stdout, "\n"), "\n")
	var hist []string
	for _, l := range lines {
		if strings.HasPrefix(l, "  #") {
			hist = append(hist, l)
		}
	}
	want := []struct {
		seq, ts, actor, kind string
		says                 []string
	}{
		{"#1", tsAt(0), "A", "plan", []string{"wave w, 1 cells"}},
		{"#2", tsAt(time.Second), "A", "claim", []string{"mode claim", "ttl 10m0s", "pid 4242 on "}},
		{"#3", tsAt(2 * time.Second), "A", "renew", []string{"epoch 1", "ttl 15m0s"}},
		{"#4", tsAt(3 * time.Second), "A", "fail", []string{`epoch 1, reason: flaky\x1b[31m red\x0aforged line`}},
		{"#5", tsAt(4 * time.Second), "A", "requeue", []string{"back to pending"}},
		{"#6", tsAt(5 * time.Second), "B", "claim", []string{"mode claim", "ttl 30m0s", "no process"}},
		{"#7", tsAt(6 * time.Second), "B", "done", []string{"epoch 2", "at " + head[:12], "1 changed", "0 evidence"}},
	}
	if len(hist) != len(want) {
		t.Fatalf("show prints %d history lines, want %d:\n%s", len(hist), len(want), res.Stdout)
	}
	for i, w := range want {
		f := strings.Fields(hist[i])
		if len(f) < 4 || f[0] != w.seq || f[1] != w.ts || f[2] != w.actor || f[3] != w.kind {
			t.Errorf("history line %d is %q, want %s %s %s %s …", i, hist[i], w.seq, w.ts, w.actor, w.kind)
		}
		for _, s := range w.says {
			if !strings.Contains(hist[i], s) {
				t.Errorf("history line %q does not say %q", hist[i], s)
			}
		}
		if strings.ContainsAny(hist[i], "{}\x1b") {
			t.Errorf("history line %q shows a raw body or a raw escape", hist[i])
		}
	}
	if strings.Contains(res.Stdout, "\nforged line") {
		t.Errorf("a line feed in a reason starts a new output line:\n%s", res.Stdout)
	}

	js := r.ok("A", "show", "w/c")
	fail := arr(t, js, "history")[3].(map[string]any)
	if body := obj(t, fail, "body"); body["reason"] != reason || body["epoch"] != 1.0 {
		t.Fatalf("show --json changed the stored body: %v", fail)
	}
}
