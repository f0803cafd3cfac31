package main

import (
	"strings"
	"testing"

	"github.com/tally-dev/tally/internal/gitserver"
	"github.com/tally-dev/tally/internal/testrepo"
)

// TestSequencerWithdrawn: a clone sequenced by its server's offer (hooks
// install --server, git daemon) keeps claiming after the server stops
// sequencing. Its next claim --next is refused by the server before
// anything is appended (SEQUENCER-ABSENT: pre-receive's verdict where
// tally's pre-receive stays, a request stored as a plain ref and deleted
// again where the server has no hooks left); the client fetches, which
// drops the withdrawn offer, and makes the claim by compare-and-swap,
// once; tally remote show then says compare-and-swap, and the claim after
// sends no request. No cell is granted twice, and no request ref is left
// on the server. A clone with tally.sequencer=true is refused instead:
// SEQUENCER-ABSENT, exit 2, saying what to do, with nothing appended.
func TestSequencerWithdrawn(t *testing.T) {
	t.Parallel()
	for _, withdraw := range []struct {
		name string
		do   func(t *testing.T, bare string)
	}{
		{"uninstalled", func(t *testing.T, bare string) {
			if r := testrepo.Run(t, bare, "server", nil, "--json", "hooks", "uninstall"); r.Code != 0 {
				t.Fatalf("tally hooks uninstall on the server: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
			}
		}},
		{"pre-receive kept", func(t *testing.T, bare string) {
			// What uninstalling the sequencer alone leaves: tally's
			// pre-receive, no routing of requests, no offer.
			testrepo.Git(t, bare, "config", "--unset-all", "receive.procReceiveRefs")
			testrepo.Git(t, bare, "update-ref", "-d", "refs/tally/sequencer")
		}},
	} {
		t.Run(withdraw.name, func(t *testing.T) {
			t.Parallel()
			c := newNetCluster(t, gitserver.GitDaemon)
			c.seeded("w", 6)
			dirs := c.agents(2)
			dir, explicit := dirs[0], dirs[1]
			sequenced(t, explicit)
			claim := func(dir string) {
				c.ok(dir, netAgent(0), nil, "--remote", "origin", "claim", "--next", "--ttl", "3600")
			}
			claimPath := func() map[string]any {
				claims, _ := c.ok(dir, netAgent(0), nil, "--remote", "origin", "remote", "show")["claims"].(map[string]any)
				return claims
			}
			claim(dir)
			claim(explicit)
			if n := pushedLedgerUpdates(t, c.bare); n != 2 {
				t.Fatalf("%d ledger updates were pushed before the server withdrew, want 2 (init and plan): the claims were not sequenced", n)
			}
			if p := claimPath(); p["path"] != "sequenced" {
				t.Fatalf("claims %v before the server withdrew, want sequenced", p)
			}

			withdraw.do(t, c.bare)
			claim(dir)
			if n := pushedLedgerUpdates(t, c.bare); n != 3 {
				t.Fatalf("%d ledger updates were pushed, want 3: the claim after the server withdrew was not made by compare-and-swap", n)
			}
			if p := claimPath(); p["path"] != "compare-and-swap" || !strings.Contains(p["why"].(string), "offers no sequencer") {
				t.Fatalf("claims %v after the server withdrew, want compare-and-swap because the remote offers no sequencer", p)
			}
			if refs := testrepo.Git(t, dir, "for-each-ref", "--format=%(refname)", "refs/remotes/origin/tally/"); strings.Contains(refs, "sequencer") {
				t.Fatalf("the clone keeps the withdrawn offer:\n%s", refs)
			}
			claim(dir)
			if n := pushedLedgerUpdates(t, c.bare); n != 4 {
				t.Fatalf("%d ledger updates were pushed, want 4: the next claim did not go by compare-and-swap", n)
			}

			before := len(netLedger(t, c.bare))
			p := c.refused(2, "SEQUENCER-ABSENT", explicit, netAgent(1), nil, "--remote", "origin", "claim", "--next", "--ttl", "3600")
			if msg, _ := p.ErrorField("message").(string); !strings.Contains(msg, "tally.sequencer false") {
				t.Fatalf("%s\nwant a message that says to set tally.sequencer false", p)
			}
			if after := len(netLedger(t, c.bare)); after != before {
				t.Fatalf("the refused request appended %d entries", after-before)
			}
			if refs := c.lsRemote(); strings.Contains(refs, "refs/for/") {
				t.Fatalf("a request ref was left on the server:\n%s", refs)
			}
			for cell, actors := range netClaims(t, c.bare) {
				if len(actors) != 1 {
					t.Fatalf("cell %s was claimed by %v: granted twice", cell, actors)
				}
			}
		})
	}
}
