package ledger

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/internal/testrepo"
)

// rangeHistory writes into the repository at dir a chain of n+1 commits,
// each the first parent of the next, with trees shaped as a ledger's are
// to a sent range (FORMAT.md §6): a new "entry" blob every commit,
// "log/0/0" a tile that grows by 32 bytes, "meta" that changes, and
// "waves/w/cells/<xx>/<c>": 256 cells in 16 shards, one cell changed a
// commit, so that the cells tree and one shard differ from the parent's
// by one entry. extra, if not nil, may change the tree of commit k
// further. Each commit's objects go into a pack of their own, written by
// gitstore as an append writes them. Everything is a function of n and
// extra: the same bytes on every run and machine. It returns the commits,
// oldest first.
func rangeHistory(t testing.TB, dir string, n int, extra func(k int, tr *gitstore.Tree)) []gitstore.ObjectID {
	t.Helper()
	repo, err := gitstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer repo.Close()
	db, err := repo.Objects()
	if err != nil {
		t.Fatal(err)
	}
	tr := gitstore.NewTree(db, gitstore.ObjectID{})
	for c := range 256 {
		must(t, tr.Set(fmt.Sprintf("waves/w/cells/%02x/c%03d", c%16, c), fmt.Appendf(nil, `{"id":"c%03d","state":"pending"}`, c)))
	}
	var commits []gitstore.ObjectID
	var tile []byte
	for k := 0; k <= n; k++ {
		tile = append(tile, bytes.Repeat([]byte{byte(k)}, 32)...)
		must(t, tr.Set("entry", fmt.Appendf(nil, `{"kind":"claim","seq":%d,"text":"entry %d of the chain"}`, k, k)))
		must(t, tr.Set("log/0/0", tile))
		must(t, tr.Set("meta", fmt.Appendf(nil, `{"size":%d}`, k+1)))
		c := (k * 37) % 256
		must(t, tr.Set(fmt.Sprintf("waves/w/cells/%02x/c%03d", c%16, c), fmt.Appendf(nil, `{"id":"c%03d","state":"claimed","seq":%d}`, c, k)))
		if extra != nil {
			extra(k, tr)
		}
		pw := gitstore.NewPackWriter()
		root, err := tr.Hash(pw)
		if err != nil {
			t.Fatal(err)
		}
		who := gitstore.Ident{Name: "tally", Email: "tally", When: 1_800_000_000 + int64(k), TZ: "+0000"}
		commit := &gitstore.Commit{Tree: root, Author: who, Committer: who, Message: fmt.Sprintf("entry %d\n", k)}
		if k > 0 {
			commit.Parents = []gitstore.ObjectID{commits[k-1]}
		}
		commits = append(commits, pw.Add(gitstore.CommitObject, commit.Encode()))
		name, err := pw.WriteTo(repo.ObjectDir)
		if err != nil {
			t.Fatal(err)
		}
		must(t, db.AddPack(name))
	}
	return commits
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// sendRange is the range the ledger at dir sends for have..tip in form.
func sendRange(t testing.TB, dir string, have, tip gitstore.ObjectID, form int) []byte {
	t.Helper()
	l, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var b bytes.Buffer
	must(t, l.SendRange(&b, have, tip, form))
	return b.Bytes()
}

// TestSendRangeFormsUnchanged: forms 1 and 2 of a sent range are byte for
// byte what the sequencer sent before form 3 (main at b40d165, whose
// output is in testdata/sent-form<F>.golden): a client from before form 3,
// which names sent 2 or none, reads exactly what it read. Run with
// TALLY_WRITE_GOLDEN=1 to write the files from the tree at hand.
func TestSendRangeFormsUnchanged(t *testing.T) {
	dir := testrepo.New(t)
	commits := rangeHistory(t, dir, 6, nil)
	for _, form := range []int{1, 2} {
		got := sendRange(t, dir, commits[0], commits[6], form)
		golden := filepath.Join("testdata", fmt.Sprintf("sent-form%d.golden", form))
		if os.Getenv("TALLY_WRITE_GOLDEN") == "1" {
			must(t, os.WriteFile(golden, got, 0o644))
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("form %d: %d bytes sent, not the %d of %s", form, len(got), len(want), golden)
		}
	}
}
