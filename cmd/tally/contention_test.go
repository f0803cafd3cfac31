package main

import (
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/tally-dev/tally/internal/gitserver"
	"github.com/tally-dev/tally/internal/testrepo"
)

// serverHook runs the bare repository's pre-receive check the way
// receive-pack runs it (GIT_DIR set, "<old> <new> <ref>" on stdin) and
// returns its exit code and stderr.
func serverHook(t *testing.T, bin, bare, stdin string) (int, string) {
	t.Helper()
	cmd := exec.Command(bin, "hook", "pre-receive")
	cmd.Dir, cmd.Env = bare, testrepo.Env("GIT_DIR="+bare)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	} else if err != nil {
		t.Fatalf("tally hook pre-receive: %v", err)
	}
	return 0, string(out)
}

// TestPreReceiveLostRaceFirst: a push whose old ledger value is no longer the
// server's is refused before its entries are looked at, with the stable
// lost-race line naming the current tip and a retry hint; the same forged
// commit pushed on the current tip is judged by the verifier instead.
func TestPreReceiveLostRaceFirst(t *testing.T) {
	c := newNetCluster(t, gitserver.GitDaemon)
	seed := c.seeded("race", 2)
	t1 := c.serverTip()
	c.ok(seed, "agent-0", nil, "--remote", "origin", "claim", "--next", "--ttl", "3600")
	t2 := c.serverTip()
	forge := func(parent string) string {
		return testrepo.Git(t, c.bare, "commit-tree", parent+"^{tree}", "-p", parent, "-m", "not an entry")
	}
	exit, out := serverHook(t, c.bin, c.bare, t1+" "+forge(t1)+" refs/tally/ledger\n")
	line := regexp.MustCompile(`(?m)^tally: refused refs/tally/ledger: CONFLICT: the ledger moved from ` + t1 + ` to ` + t2 + `; retry-after-ms=([0-9]+)$`).FindStringSubmatch(out)
	if exit != 1 || line == nil {
		t.Fatalf("stale push: exit %d, want the lost-race refusal:\n%s", exit, out)
	}
	if ms, _ := strconv.Atoi(line[1]); ms < 5 || ms > 1000 {
		t.Fatalf("retry hint %d ms for one entry landed, want within [5, 1000]", ms)
	}
	exit, out = serverHook(t, c.bin, c.bare, t2+" "+forge(t2)+" refs/tally/ledger\n")
	if exit != 1 || !strings.Contains(out, "tally: refused refs/tally/ledger: ") || strings.Contains(out, "CONFLICT") {
		t.Fatalf("forged entry on the current tip: exit %d, want the verifier's refusal:\n%s", exit, out)
	}
}

// sequenced turns the sequencer on in each clone (git config tally.sequencer).
func sequenced(t testing.TB, dirs ...string) {
	for _, d := range dirs {
		testrepo.Git(t, d, "config", "tally.sequencer", "true")
	}
}

// TestSequencedClaimNext: with the sequencer on, agents' claim --next goes to
// the server as a request, round after round with all agents at once: every
// agent gets a cell, none twice, the server's ledger holds exactly the
// claims the agents were told about (by them, one per cell), no request ref
// is left on the server, and the ledger verifies.
func TestSequencedClaimNext(t *testing.T) {
	rounds, agents := 4, 6
	if netStress() {
		rounds = 30
	}
	for _, kind := range gitserver.Kinds {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			c := newNetCluster(t, kind)
			seed := c.seeded("seq", rounds*agents)
			dirs := c.agents(agents)
			sequenced(t, dirs...)
			told := map[string]string{}
			for round := 0; round < rounds; round++ {
				out := netTogether(agents, func(i int) netProc {
					return netRun(c.bin, dirs[i], netAgent(i), nil, "--remote", "origin", "claim", "--next", "--ttl", "3600")
				})
				for i, p := range out {
					if p.Err != nil || p.Code != 0 {
						t.Fatalf("round %d %s: %s %v", round, netAgent(i), p, p.Err)
					}
					key := fmt.Sprintf("%v/%v", p.JSON["wave"], p.JSON["cell"])
					if prev, ok := told[key]; ok {
						t.Fatalf("%s granted to %s and %s", key, prev, netAgent(i))
					}
					told[key] = netAgent(i)
				}
			}
			claims := map[string][]string{}
			for _, e := range netLedger(t, c.bare) {
				if e.Kind == "claim" {
					claims[e.cell()] = append(claims[e.cell()], e.Actor)
				}
			}
			if len(claims) != len(told) {
				t.Fatalf("server ledger has claims of %d cells, agents were told %d", len(claims), len(told))
			}
			for cell, who := range told {
				if got := claims[cell]; len(got) != 1 || got[0] != who {
					t.Fatalf("%s: server ledger has claims by %v, agent told %s", cell, got, who)
				}
			}
			if refs := c.lsRemote(); strings.Contains(refs, "refs/for/") {
				t.Fatalf("request refs left on the server:\n%s", refs)
			}
			res := c.ok(seed, "auditor", nil, "--remote", "origin", "verify", "--full")
			if res["entries"] != float64(2+rounds*agents) {
				t.Fatalf("remote verify: %v", res)
			}
		})
	}
}
