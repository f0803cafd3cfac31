package gitstore

import (
	"errors"
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
