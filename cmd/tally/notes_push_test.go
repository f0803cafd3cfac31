package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tally-dev/tally/internal/gitserver"
	"github.com/tally-dev/tally/internal/testrepo"
)

// TestRemoteNotesTravel: receipt notes reach the server. Two clones in
// remote mode finish a cell each at the same moment; both dones push their
// note to the server's refs/notes/tally (whose hook takes only fast-forwards
// that add lines naming receipts of its ledger), the loser of the race
// merging with the winner's note instead of failing non-fast-forward. A
// third clone's receipt verify then finds both notes. A done whose commit
// the server does not have yet still succeeds and reports its note pending;
// once the commit is pushed, tally sync pushes the note.
func TestRemoteNotesTravel(t *testing.T) {
	for _, kind := range gitserver.Kinds {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			c := newNetCluster(t, kind)
			c.seeded("w", 3)
			dirs := []string{c.clone("a"), c.clone("b")}
			epochs := make([]string, 2)
			commits := make([]string, 2)
			for i, dir := range dirs {
				c.ok(dir, netAgent(i), nil, "remote", "set", "origin")
				epochs[i] = netClaimEpoch(c, dir, netAgent(i), fmt.Sprintf("w/c%03d", i))
				commits[i] = netWork(t, dir, fmt.Sprintf("f%d", i))
				if _, err := netGit(dir, nil, "push", "-q", "origin", fmt.Sprintf("HEAD:refs/heads/work-%d", i)); err != nil {
					t.Fatal(err)
				}
			}
			dones := netTogether(2, func(i int) testrepo.Result {
				return netRun(c.bin, dirs[i], netAgent(i), nil, "done", fmt.Sprintf("w/c%03d", i), "--epoch", epochs[i])
			})
			for _, d := range dones {
				if d.Err != nil || d.Code != 0 {
					t.Fatalf("%s: %v", d, d.Err)
				}
			}
			for i := range dirs {
				note, err := netGit(c.bare, nil, "notes", "--ref", "tally", "show", commits[i])
				if err != nil || !strings.Contains(note, fmt.Sprintf("cell=w/c%03d epoch=%s", i, epochs[i])) {
					t.Fatalf("server note of %s: %q %v\n%v", commits[i], note, err, dones)
				}
			}
			for i, d := range dones {
				np, _ := d.JSON["notes_push"].(map[string]any)
				if pushed, _ := np["pushed"].([]any); len(pushed) != 1 || pushed[0] != commits[i] || np["error"] != nil {
					t.Fatalf("done %d: notes_push %v, want pushed [%s]", i, np, commits[i])
				}
			}

			third := c.clone("third")
			c.ok(third, "C", nil, "remote", "set", "origin")
			for i := range dirs {
				if _, err := netGit(third, nil, "fetch", "-q", "origin"); err != nil {
					t.Fatal(err)
				}
				v := c.ok(third, "C", nil, "receipt", "verify", commits[i])
				rs, _ := v["receipts"].([]any)
				r0, _ := rs[0].(map[string]any)
				checks, _ := r0["checks"].(map[string]any)
				if len(rs) != 1 || checks["note"] != true {
					t.Fatalf("receipt verify %s in a third clone: %v", commits[i], v)
				}
				if w, _ := v["warnings"].([]any); len(w) != 0 {
					t.Fatalf("receipt verify %s warns %v", commits[i], w)
				}
			}

			// A done before its commit is on the server: the note waits.
			a := dirs[0]
			epoch := netClaimEpoch(c, a, netAgent(0), "w/c002")
			late := netWork(t, a, "late")
			d := c.ok(a, netAgent(0), nil, "done", "w/c002", "--epoch", epoch)
			np, _ := d["notes_push"].(map[string]any)
			if pending, _ := np["pending"].([]any); len(pending) != 1 || pending[0] != late || np["error"] == nil {
				t.Fatalf("done before pushing the commit: notes_push %v, want pending [%s] with a reason", np, late)
			}
			if note, err := netGit(c.bare, nil, "notes", "--ref", "tally", "show", late); err == nil {
				t.Fatalf("the server has a note on a commit it lacks: %q", note)
			}
			if _, err := netGit(a, nil, "push", "-q", "origin", "HEAD:refs/heads/work-late"); err != nil {
				t.Fatal(err)
			}
			sy := c.ok(a, netAgent(0), nil, "sync", "origin")
			np, _ = sy["notes_push"].(map[string]any)
			if pushed, _ := np["pushed"].([]any); len(pushed) != 1 || pushed[0] != late {
				t.Fatalf("sync: notes_push %v, want pushed [%s]", np, late)
			}
			if note, err := netGit(c.bare, nil, "notes", "--ref", "tally", "show", late); err != nil || !strings.Contains(note, "cell=w/c002") {
				t.Fatalf("server note of %s after sync: %q %v", late, note, err)
			}
		})
	}
}

// netClaimEpoch claims cell in dir as actor and returns the lease's epoch.
func netClaimEpoch(c *netCluster, dir, actor, cell string) string {
	c.t.Helper()
	l, _ := c.ok(dir, actor, nil, "claim", cell)["lease"].(map[string]any)
	epoch, _ := l["epoch"].(float64)
	if epoch < 1 {
		c.t.Fatalf("claim %s: lease %v", cell, l)
	}
	return strconv.Itoa(int(epoch))
}

// netWork commits a new file name in dir and returns the commit.
func netWork(t *testing.T, dir, name string) string {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(name+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := netGit(dir, nil, "add", name); err != nil {
		t.Fatal(err)
	}
	if _, err := netGit(dir, nil, "commit", "-q", "-m", "work "+name); err != nil {
		t.Fatal(err)
	}
	out, err := netGit(dir, nil, "rev-parse", "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	return out
}
