package gitstore

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// fetchSite is a repository that plays the remote (a ledger ref and an
// optional ref at one commit) and a clone that fetches from it by path.
type fetchSite struct {
	remote, clone *odbRepo
	r             *Repo
}

func newFetchSite(t *testing.T) *fetchSite {
	t.Helper()
	s := &fetchSite{remote: odbNewRepo(t), clone: odbNewRepo(t)}
	s.remote.git(nil, "commit", "-q", "--allow-empty", "-m", "ledger")
	s.remote.git(nil, "update-ref", "refs/tally/ledger", "HEAD")
	s.remote.git(nil, "update-ref", "refs/tally/sequencer", "HEAD")
	s.clone.git(nil, "commit", "-q", "--allow-empty", "-m", "own")
	var err error
	if s.r, err = Open(s.clone.dir); err != nil {
		t.Fatal(err)
	}
	return s
}

// fetch fetches the remote's ledger into refs/remotes/o/tally/ledger, with
// refs/tally/sequencer as an optional ref.
func (s *fetchSite) fetch(t *testing.T) {
	t.Helper()
	if _, err := s.r.FetchRef(s.remote.dir, "refs/tally/ledger", "refs/remotes/o/tally/ledger",
		RefPair{Ref: "refs/tally/sequencer", Tracking: "refs/remotes/o/tally/sequencer"}); err != nil {
		t.Fatal(err)
	}
}

func (s *fetchSite) has(t *testing.T, ref string) bool {
	t.Helper()
	_, err := s.r.ReadRef(ref)
	if err != nil && !errors.Is(err, ErrNoRef) {
		t.Fatal(err)
	}
	return err == nil
}

// TestFetchPrunesWithdrawnOptionalRef: an optional ref the remote no longer
// has loses its tracking ref at the next fetch, and nothing else goes: not
// the ledger's tracking ref, not another process's scratch ref, not a local
// tag, even with fetch.prune and fetch.pruneTags set.
func TestFetchPrunesWithdrawnOptionalRef(t *testing.T) {
	s := newFetchSite(t)
	s.clone.git(nil, "tag", "local-only")
	s.clone.git(nil, "config", "fetch.prune", "true")
	s.clone.git(nil, "config", "fetch.pruneTags", "true")
	s.fetch(t)
	if !s.has(t, "refs/remotes/o/tally/sequencer") {
		t.Fatal("the remote's optional ref was not fetched")
	}
	other := "refs/remotes/o/tally/ledger.fetch-1" // pid 1 (init) lives: its fetch is under way
	s.clone.git(nil, "update-ref", other, "HEAD")

	s.remote.git(nil, "update-ref", "-d", "refs/tally/sequencer")
	s.fetch(t)
	if s.has(t, "refs/remotes/o/tally/sequencer") {
		t.Fatal("the tracking ref of an optional ref the remote no longer has was kept")
	}
	for _, ref := range []string{"refs/remotes/o/tally/ledger", other, "refs/tags/local-only"} {
		if !s.has(t, ref) {
			t.Errorf("%s was pruned", ref)
		}
	}

	s.remote.git(nil, "update-ref", "refs/tally/sequencer", "HEAD")
	s.fetch(t)
	if !s.has(t, "refs/remotes/o/tally/sequencer") {
		t.Fatal("an optional ref offered again was not fetched")
	}
}

// TestFetchSweepsScratchOfGoneProcesses: the scratch refs a killed fetch
// leaves behind (<tracking>.fetch-…) are deleted by the next fetch that
// lands when their process is gone — a child this test started and
// reaped, loose or packed, named as now or as before process tables — and
// kept when it lives (this test's own process) or belongs to another
// process table (another container's or host's pid, which means nothing
// here).
func TestFetchSweepsScratchOfGoneProcesses(t *testing.T) {
	s := newFetchSite(t)
	child := exec.Command("git", "--version")
	if err := child.Run(); err != nil { // run and reaped: its pid is gone
		t.Fatal(err)
	}
	dead := child.Process.Pid
	tracking := "refs/remotes/o/tally/ledger"
	table, ok := scratchTable()
	if !ok {
		t.Skip("this process's process table cannot be named here: no sweep")
	}
	named := func(pid int, table string) string {
		return fmt.Sprintf("%s.fetch-%d-%s-0000002a", tracking, pid, table)
	}
	legacyDead := fmt.Sprintf("%s.fetch-%d", tracking, dead)
	foreignDead := named(dead, "ffffffff")
	if table == "ffffffff" {
		foreignDead = named(dead, "00000000")
	}
	s.clone.git(nil, "update-ref", legacyDead, "HEAD")
	s.clone.git(nil, "update-ref", foreignDead, "HEAD")
	s.clone.git(nil, "pack-refs", "--all", "--prune")
	looseDead, live := named(dead, table), named(os.Getpid(), table)
	s.clone.git(nil, "update-ref", looseDead, "HEAD")
	s.clone.git(nil, "update-ref", live, "HEAD")

	s.fetch(t)
	for _, ref := range []string{legacyDead, looseDead} {
		if s.has(t, ref) {
			t.Errorf("%s (pid %d, gone) was kept", ref, dead)
		}
	}
	for _, ref := range []string{live, foreignDead} {
		if !s.has(t, ref) {
			t.Errorf("%s was deleted: its process lives, or is another process table's", ref)
		}
	}
	if left := string(s.clone.git(nil, "for-each-ref", "--format=%(refname)", tracking+".fetch-*")); strings.Count(left, "\n") != 2 {
		t.Errorf("scratch refs after the fetch:\n%s\nwant only %s and %s (the fetch's own is deleted)", left, live, foreignDead)
	}
}

// BenchmarkSweepScratchNothingStale: what every fetch that lands pays for
// the sweep when nothing is left behind, in a clone whose packed-refs
// holds 10,000 refs (the search of packed-refs and the read of the
// tracking ref's directory; no git process runs).
func BenchmarkSweepScratchNothingStale(b *testing.B) {
	g := odbNewRepo(b)
	g.git(nil, "commit", "-q", "--allow-empty", "-m", "a")
	var refs strings.Builder
	for i := 0; i < 10000; i++ {
		fmt.Fprintf(&refs, "create refs/heads/branch-%05d HEAD\n", i)
	}
	g.git([]byte(refs.String()), "update-ref", "--stdin")
	g.git(nil, "update-ref", "refs/remotes/o/tally/ledger", "HEAD")
	g.git(nil, "pack-refs", "--all", "--prune")
	r, err := Open(g.dir)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.sweepScratch("refs/remotes/o/tally/ledger")
	}
}
