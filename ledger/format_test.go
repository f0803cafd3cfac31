package ledger_test

// Facts of FORMAT.md that a verifier written from the document alone must
// reproduce, at the level of ledger commits and their stored state (the
// rules' own facts are pinned by lease's TestFormatFacts*).

import (
	"bytes"
	"compress/zlib"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/internal/testrepo"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/ledger"
)

// TestFormatFactsTimeRange pins §2's time range: a writer whose clock is a
// millisecond before 1970-01-01T00:00:00.000Z (a negative commit time, which
// git refuses) writes nothing, with USAGE and the first instant as its
// limit; a ledger whose genesis carries such a ts is CORRUPT at seq 0.
func TestFormatFactsTimeRange(t *testing.T) {
	t.Parallel()
	dir := testrepo.New(t)
	early := time.Date(1969, 12, 31, 23, 59, 59, 999_000_000, time.UTC)
	l, err := ledger.Open(dir, ledger.Options{Now: func() time.Time { return early }})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = l.Append("A", genesisDraft("early"))
	if e := errs.From(err); e == nil || e.Code != errs.Usage || e.Details["limit"] != "1970-01-01T00:00:00.000Z" {
		t.Fatalf("a genesis at %s: %v, want USAGE with the first instant as limit", early, err)
	}
	if _, err := gitTry(dir, nil, "rev-parse", "-q", "--verify", ledgerRef); err == nil {
		t.Fatal("a refused genesis made a ledger")
	}

	dir, commits := buildRepo(t, 3)
	e := decodeEntry(t, readChain(t, dir)[0].Raw)
	e.TS = "1969-12-31T23:59:59.999Z"
	raw, err := e.Encode()
	if err != nil {
		t.Fatal(err)
	}
	replaceEntry(t, dir, commits, 0, raw, true)
	verifyFails(t, dir, "CORRUPT", 0)
}

// TestFormatFactsEntryTrailer pins §10 step 3: of several Tally-Entry
// trailers the last one is compared with the entry's hash, so a commit
// whose last one is wrong is HASH-MISMATCH, and one whose last one is right
// passes step 3 and is COMMIT-MISMATCH (step 7: its message is not §4's).
func TestFormatFactsEntryTrailer(t *testing.T) {
	t.Parallel()
	const k = 4
	wrong := strings.Repeat("0", 64)
	for code, edit := range map[string]func(msg, right string) string{
		"HASH-MISMATCH": func(msg, right string) string { return msg + "Tally-Entry: " + wrong + "\n" },
		"COMMIT-MISMATCH": func(msg, right string) string {
			return strings.Replace(msg, right, "Tally-Entry: "+wrong+"\n"+right, 1)
		},
	} {
		t.Run(code, func(t *testing.T) {
			t.Parallel()
			dir, commits, entries := tamperFixture(t)
			c := catCommit(t, dir, commits[k])
			right := "Tally-Entry: " + entryHashHex(entries[k].Raw) + "\n"
			if !strings.HasSuffix(c, right) {
				t.Fatalf("commit %d does not end with its trailer:\n%s", k, c)
			}
			forged := edit(c, right)
			forceRef(t, dir, reparent(t, dir, writeObject(t, dir, "commit", []byte(forged)), commits[k+1:]))
			verifyFails(t, dir, code, k, "--full")
		})
	}
}

// TestFormatFactsStateBlobs pins §6 against §10 step 6: a state blob a
// reader refuses as CORRUPT — a wave bitmap with unused bits set, a layout
// blob with a member it does not have — is, in a ledger, STATE-MISMATCH at
// the entry whose tree holds it: verify rebuilds every state from the rules
// and compares trees; it never reads a stored state blob.
func TestFormatFactsStateBlobs(t *testing.T) {
	t.Parallel()
	chunked := lease.ReceiptIndexChunked
	for _, c := range []struct {
		name, key string
		seq       int
		forge     func(stored string) string
		read      func(kv chain.KV) error
	}{
		{"bitmap", "waves/w/wave", 1,
			func(stored string) string { return strings.Replace(stored, `"ready":"AQ"`, `"ready":"AR"`, 1) },
			func(kv chain.KV) error { _, err := lease.Ready(kv, "w", time.Now(), 0); return err }},
		{"layout", "layout", 0,
			func(stored string) string { return strings.Replace(stored, `}`, `,"v":1}`, 1) },
			func(kv chain.KV) error { _, err := lease.ReadLayout(kv); return err }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := testrepo.New(t)
			l := openLedger(t, dir)
			genesis := func(*ledger.Snapshot, time.Time) (*ledger.Draft, error) {
				return &ledger.Draft{Kind: chain.KindGenesis, Body: chain.GenesisBody{Origin: "o", ReceiptIndex: &chunked}}, nil
			}
			plan := func(*ledger.Snapshot, time.Time) (*ledger.Draft, error) {
				return &ledger.Draft{Kind: "plan", Body: lease.PlanBody{Wave: "w", Cells: []lease.PlanCell{{ID: "a"}}}}, nil
			}
			for _, b := range []ledger.BuildFunc{genesis, plan, noteDraft("after")} {
				if _, err := l.Append("A", b); err != nil {
					t.Fatal(err)
				}
			}
			commits := revList(t, dir, ledgerRef)
			db, err := l.Repo.Objects()
			if err != nil {
				t.Fatal(err)
			}
			cm := catCommit(t, dir, commits[c.seq])
			id, _ := gitstore.ParseObjectID(commitTree(cm))
			tr := gitstore.NewTree(db, id)
			stored, ok, err := tr.Get(c.key)
			if err != nil || !ok {
				t.Fatalf("no %s: %v", c.key, err)
			}
			forged := c.forge(string(stored))
			if forged == string(stored) {
				t.Fatalf("%s %s: nothing forged", c.key, stored)
			}
			if err := tr.Set(c.key, []byte(forged)); err != nil {
				t.Fatal(err)
			}
			if err := c.read(tr); errs.CodeOf(err) != errs.Corrupt {
				t.Fatalf("reading the forged %s %s: %v, want CORRUPT", c.key, forged, err)
			}
			pw := gitstore.NewPackWriter()
			nt, err := tr.Hash(pw)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := pw.WriteTo(l.Repo.ObjectDir); err != nil {
				t.Fatal(err)
			}
			forceRef(t, dir, reparent(t, dir, writeObject(t, dir, "commit", []byte(withTree(cm, nt.String()))), commits[c.seq+1:]))
			verifyFails(t, dir, "STATE-MISMATCH", c.seq, "--full")
		})
	}
}

// TestFormatFactsStoredTwice pins §10 step 9 for an object stored more than
// once: with two packed copies, damaging either one leaves verify --full
// passing (one intact packed copy suffices, whichever pack a lookup meets
// first), and so does a damaged loose copy beside them (no read takes it).
func TestFormatFactsStoredTwice(t *testing.T) {
	t.Parallel()
	dir, commits := buildRepo(t, 8)
	waitMaintenance(t, dir)
	meta := strings.TrimSpace(gitIn(t, dir, nil, "rev-parse", commits[3]+":meta"))
	objects := filepath.Join(gitDir(t, dir), "objects")
	gitIn(t, dir, []byte(meta+"\n"), "pack-objects", "-q", filepath.Join(objects, "pack", "twice"))
	mid := func(start, end int64) int64 { return (start + end) / 2 }
	idxs, _ := filepath.Glob(filepath.Join(objects, "pack", "*.idx"))
	damaged := 0
	for _, idx := range idxs {
		if flipIndexedByte(t, dir, idx, meta, mid) == "" {
			continue
		}
		damaged++
		verifyOK(t, dir, true)
		flipIndexedByte(t, dir, idx, meta, mid) // intact again
	}
	if damaged != 2 {
		t.Fatalf("the meta blob is in %d packs, want 2", damaged)
	}

	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write([]byte("blob 7\x00damaged"))
	zw.Close()
	loose := filepath.Join(objects, meta[:2], meta[2:])
	if err := os.MkdirAll(filepath.Dir(loose), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(loose, z.Bytes(), 0o444); err != nil {
		t.Fatal(err)
	}
	verifyOK(t, dir, true)
}
