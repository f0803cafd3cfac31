package main

import (
	"strings"
	"testing"

	"github.com/tally-dev/tally/internal/gitserver"
	"github.com/tally-dev/tally/internal/testrepo"
)

// TestRemoteFreshClone: git clone does not fetch refs/tally/*, so a fresh
// clone of a repository whose server holds a ledger has none. Its status is
// NOT-INITIALIZED naming the remote that has one and the two ways to use it;
// its init is refused (LEDGER-ON-REMOTE, exit 2) and writes nothing, so no
// second genesis is made by following a hint. Either way out of the hint
// works: tally remote set origin, or fetching the namespace and working
// locally (then sync is a plain up-to-date). init --new-ledger still starts
// a separate ledger when asked for explicitly; init is also refused,
// retryably, when a remote cannot be asked.
func TestRemoteFreshClone(t *testing.T) {
	for _, kind := range gitserver.Kinds {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			c := newNetCluster(t, kind)
			c.seeded("w", 2)
			serverTip := c.serverTip()

			fresh := c.clone("fresh")
			if out, _ := netGit(fresh, nil, "rev-parse", "-q", "--verify", "refs/tally/ledger"); out != "" {
				t.Fatalf("git clone fetched the ledger (%s): the test no longer shows the fresh-clone case", out)
			}
			p := c.refused(2, "NOT-INITIALIZED", fresh, "A", nil, "status")
			msg, _ := p.ErrorField("message").(string)
			for _, want := range []string{"remote origin has one", "tally remote set origin", "git fetch origin 'refs/tally/*:refs/tally/*'"} {
				if !strings.Contains(msg, want) {
					t.Errorf("status message %q lacks %q", msg, want)
				}
			}
			if r, _ := p.ErrorField("remotes").([]any); len(r) != 1 || r[0] != "origin" {
				t.Errorf("remotes detail %v, want [origin]", p.ErrorField("remotes"))
			}

			p = c.refused(2, "LEDGER-ON-REMOTE", fresh, "A", nil, "init")
			if r, _ := p.ErrorField("remotes").([]any); len(r) != 1 || r[0] != "origin" {
				t.Errorf("remotes detail %v, want [origin]", p.ErrorField("remotes"))
			}
			if msg, _ := p.ErrorField("message").(string); !strings.Contains(msg, "--new-ledger") {
				t.Errorf("init refusal %q does not name --new-ledger", msg)
			}
			if out, _ := netGit(fresh, nil, "rev-parse", "-q", "--verify", "refs/tally/ledger"); out != "" {
				t.Fatalf("refused init wrote a ledger %s", out)
			}

			// The hint's first way: work through the remote.
			c.ok(fresh, "A", nil, "remote", "set", "origin")
			st := c.ok(fresh, "A", nil, "status")
			if w, _ := st["waves"].([]any); len(w) != 1 {
				t.Fatalf("status through origin: %v", st)
			}
			// Its second way: copy the ledger and work locally.
			local := c.clone("local")
			if _, err := netGit(local, nil, "fetch", "origin", "refs/tally/*:refs/tally/*"); err != nil {
				t.Fatal(err)
			}
			c.ok(local, "A", nil, "status")
			if s := c.ok(local, "A", nil, "sync", "origin"); s["action"] != "up-to-date" {
				t.Fatalf("sync after fetching the ledger: %v", s)
			}
			if got := c.serverTip(); got != serverTip {
				t.Fatalf("server ledger moved from %s to %s", serverTip, got)
			}

			// Explicitly asked for, a separate ledger is made (and then
			// status no longer asks the remotes: the clone has a ledger).
			sep := c.clone("separate")
			c.ok(sep, "A", nil, "init", "--new-ledger")
			c.ok(sep, "A", nil, "status")
			c.refused(3, "FORK-DETECTED", sep, "A", nil, "sync", "origin")

			// A remote that cannot be asked: init does not guess.
			dead := testrepo.New(t)
			netWaitMaintenance(t, dead)
			testrepo.Git(t, dead, "remote", "add", "dead", "git://"+netDeadAddr(t)+"/shared.git")
			p = c.refused(1, "REMOTE-UNREACHABLE", dead, "A", nil, "init")
			if p.ErrorField("remote") != "dead" {
				t.Errorf("remote detail %v, want dead", p.ErrorField("remote"))
			}
			c.ok(dead, "A", nil, "init", "--new-ledger")
		})
	}
}
