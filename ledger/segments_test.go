package ledger

import (
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/internal/testrepo"
	"github.com/tally-dev/tally/lease"
)

// Verify cuts a long chain into segments checked in parallel. A defect in
// any segment must be reported at its own seq, and a defect in the state a
// segment starts from must be caught by the segment before it.
func TestSegmentedVerifyFindsTheFirstBadEntry(t *testing.T) {
	defer func(n int) { minSegment = n }(minSegment)
	minSegment = 10
	dir := testrepo.New(t)
	l, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	builds := []BuildFunc{func(*Snapshot, time.Time) (*Draft, error) {
		return &Draft{Kind: chain.KindGenesis, Body: chain.GenesisBody{Origin: "seg"}}, nil
	}}
	for i := 0; i < 60; i++ {
		builds = append(builds, func(*Snapshot, time.Time) (*Draft, error) {
			return &Draft{Kind: "note", Body: lease.NoteBody{Text: "n"}}, nil
		})
	}
	if _, err := l.AppendBatch("a", builds); err != nil {
		t.Fatal(err)
	}
	if rep, err := l.Verify(true); err != nil || rep.Entries != 61 {
		t.Fatalf("clean chain: %v, %v", rep, err)
	}
	// Replace the meta blob of commit at seq s with a wrong one, re-chaining
	// the later commits: with 2+ segments, some seqs are the last of a
	// segment, whose tree the next segment starts from. Segments are cut
	// from the tip (seq 60), so seq b ends one.
	b := uint64(60 - 3*segmentLen(61, max(1, runtime.GOMAXPROCS(0))))
	for _, s := range []uint64{5, b - 1, b, b + 1, 59} {
		tampered := tamperMeta(t, l, s)
		_, err := l.VerifyRange(gitstore.ObjectID{}, tampered)
		if e := errs.From(err); e.Code != "STATE-MISMATCH" || e.Details["seq"] != s {
			t.Errorf("tampered meta at seq %d: got %v (seq %v)", s, err, e.Details["seq"])
		}
	}
}

// tamperMeta rewrites the ledger so that the commit at seq s has a wrong
// meta blob, and returns the new tip (the ref is left alone).
func tamperMeta(t *testing.T, l *Ledger, s uint64) gitstore.ObjectID {
	t.Helper()
	git := func(stdin string, args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env, cmd.Stdin = l.Repo.WorkTree, testrepo.Env(), strings.NewReader(stdin)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	commits := strings.Fields(git("", "rev-list", "--reverse", l.Ref))
	tree := git("", "rev-parse", commits[s]+"^{tree}")
	var lines []string
	for _, line := range strings.Split(git("", "ls-tree", tree), "\n") {
		if strings.HasSuffix(line, "\tmeta") {
			blob := git(`{"wrong":true}`, "hash-object", "-w", "--stdin")
			line = "100644 blob " + blob + "\tmeta"
		}
		lines = append(lines, line)
	}
	newTree := git(strings.Join(lines, "\n")+"\n", "mktree")
	parent := ""
	for i, c := range commits[s:] {
		raw := git("", "cat-file", "commit", c)
		hdr, msg, _ := strings.Cut(raw, "\n\n")
		var out []string
		for _, h := range strings.Split(hdr, "\n") {
			switch {
			case i == 0 && strings.HasPrefix(h, "tree "):
				h = "tree " + newTree
			case i > 0 && strings.HasPrefix(h, "parent "):
				h = "parent " + parent
			}
			out = append(out, h)
		}
		parent = git(strings.Join(out, "\n")+"\n\n"+msg+"\n", "hash-object", "-t", "commit", "-w", "--stdin")
	}
	id, err := gitstore.ParseObjectID(parent)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// The segments of a long range share the work evenly among the workers:
// each of half of minSegment to minSegment entries, and unless they are
// held to that half, the busiest worker (segments of one length go round
// the workers) checks fewer than one entry a round more than its share.
// Segments of minSegment each left one of 2 workers 61% of a 20k-entry
// range.
func TestSegmentsShareTheWorkEvenly(t *testing.T) {
	for workers := 1; workers <= 4; workers++ {
		for n := minSegment; n <= 12*minSegment; n += 97 {
			l := segmentLen(n, workers)
			segs := (n + l - 1) / l
			rounds := (segs + workers - 1) / workers
			if l > minSegment || 2*l < minSegment || 2*l > minSegment && rounds*l*workers-n >= workers*rounds {
				t.Fatalf("%d entries, %d workers: %d segments of %d, the busiest worker checks %d", n, workers, segs, l, rounds*l)
			}
		}
	}
}
