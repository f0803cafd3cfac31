package anchor_test

// Benchmarks of checkpoints and proofs read from Merkle tiles: map-backed
// tiles of 100k and 1M entries (each operation reads O(log n) tiles through a
// fresh reader, as one request would), a real 100k-entry ledger in git with
// TALLY_BIG_BENCH=1, and a full verify of signed entries. Run with
// TMPDIR=/work/tmp (or another fast disk) for the git-backed ones.

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tally-dev/tally/anchor"
	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/identity"
	"github.com/tally-dev/tally/internal/testrepo"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/ledger"
)

var benchLogs struct {
	sync.Mutex
	m map[uint64]*memLog
}

func benchLog(b *testing.B, size uint64) *memLog {
	benchLogs.Lock()
	defer benchLogs.Unlock()
	if l := benchLogs.m[size]; l != nil {
		return l
	}
	if benchLogs.m == nil {
		benchLogs.m = map[uint64]*memLog{}
	}
	l := newMemLog("bench/log").grow(b, 'a', size)
	benchLogs.m[size] = l
	return l
}

func benchSigner(b *testing.B) *anchor.Signer {
	priv, _, err := identity.Generate("")
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "key")
	os.WriteFile(path, priv, 0o600)
	s, err := anchor.LoadSigner(path, "", "bench/log")
	if err != nil {
		b.Fatal(err)
	}
	return s
}

var benchSizes = []uint64{100_000, 1_000_000}

// BenchmarkCheckpoint: the root recomputed from the tiles, checked against
// the meta, signed.
func BenchmarkCheckpoint(b *testing.B) {
	s := benchSigner(b)
	for _, size := range benchSizes {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			l := benchLog(b, size)
			for b.Loop() {
				c, err := anchor.FromTiles(l.kv, l.meta)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := anchor.Sign(c, gitstore.ObjectID{}, s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCheck: a checkpoint of about half the log checked for consistency
// (its root recomputed from the tiles, a consistency proof made and checked).
func BenchmarkCheck(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			l := benchLog(b, size)
			half := newMemLog("bench/log").grow(b, 'a', size/2+7)
			c := anchor.FromMeta(half.meta)
			for b.Loop() {
				if _, err := anchor.Check(l.kv, l.meta, c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkProveInclusion: proof read from the tiles, self-checked, as text.
func BenchmarkProveInclusion(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			l := benchLog(b, size)
			seq := uint64(0)
			for b.Loop() {
				seq = (seq + 7919) % size
				p, err := anchor.ProveInclusion(l.kv, l.meta, seq, 0)
				if err != nil {
					b.Fatal(err)
				}
				p.Text()
			}
		})
	}
}

func BenchmarkProveConsistency(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			l := benchLog(b, size)
			old := uint64(0)
			for b.Loop() {
				old = (old+7919)%(size-1) + 1
				p, err := anchor.ProveConsistency(l.kv, l.meta, old, 0)
				if err != nil {
					b.Fatal(err)
				}
				p.Text()
			}
		})
	}
}

// BenchmarkVerifyProof: parse and verify a proof's text, as verify-proof does.
func BenchmarkVerifyProof(b *testing.B) {
	l := benchLog(b, 1_000_000)
	inc, _ := anchor.ProveInclusion(l.kv, l.meta, 123457, 0)
	cons, _ := anchor.ProveConsistency(l.kv, l.meta, 123457, 0)
	for _, p := range []*anchor.Proof{inc, cons} {
		text := p.Text()
		b.Run(p.Type, func(b *testing.B) {
			for b.Loop() {
				if _, err := anchor.VerifyProof(text); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkLedger100k reads checkpoints and proofs from a real ledger of
// 100,001 entries in git (built with AppendBatch, about half a minute); each
// operation opens the tip snapshot afresh, so tiles are read from git objects.
// Set TALLY_BIG_BENCH=1.
func BenchmarkLedger100k(b *testing.B) {
	if os.Getenv("TALLY_BIG_BENCH") != "1" {
		b.Skip("set TALLY_BIG_BENCH=1 to build a 100k-entry ledger")
	}
	const n = 100_000
	dir := testrepo.New(b)
	l, err := ledger.Open(dir, ledger.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	b.Cleanup(l.WaitMaintenance)
	start := time.Now()
	for total := 0; total < n+1; {
		var builds []ledger.BuildFunc
		if total == 0 {
			builds = append(builds, genesisBuild("bench/ledger"))
		}
		for len(builds) < min(10_000, n+1-total) {
			builds = append(builds, noteBuild)
		}
		if _, err := l.AppendBatch(actor, builds); err != nil {
			b.Fatal(err)
		}
		total += len(builds)
	}
	b.Logf("built a ledger of %d entries in %v", n+1, time.Since(start))
	head := func(b *testing.B) *ledger.Snapshot {
		s, err := l.Head()
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	s := head(b)
	if s.Meta.Size != n+1 {
		b.Fatalf("ledger has %d entries", s.Meta.Size)
	}
	sig := benchSigner(b)
	half, _ := anchor.ProveConsistency(s, s.Meta, n/2, n/2) // root of the first n/2 entries
	cpHalf := anchor.Checkpoint{Origin: s.Meta.Origin, Size: n / 2, Root: half.Root}
	b.Run("checkpoint", func(b *testing.B) {
		for b.Loop() {
			s := head(b)
			c, err := anchor.FromTiles(s, s.Meta)
			if err == nil {
				_, err = anchor.Sign(c, gitstore.ObjectID{}, sig)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("check", func(b *testing.B) {
		for b.Loop() {
			s := head(b)
			if _, err := anchor.Check(s, s.Meta, cpHalf); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("inclusion", func(b *testing.B) {
		seq := uint64(0)
		for b.Loop() {
			seq = (seq + 7919) % n
			s := head(b)
			if _, err := anchor.ProveInclusion(s, s.Meta, seq, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("consistency", func(b *testing.B) {
		old := uint64(0)
		for b.Loop() {
			old = (old+7919)%(n-1) + 1
			s := head(b)
			if _, err := anchor.ProveConsistency(s, s.Meta, old, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func genesisBuild(origin string) ledger.BuildFunc {
	return func(*ledger.Snapshot, time.Time) (*ledger.Draft, error) {
		return &ledger.Draft{Kind: chain.KindGenesis, Body: chain.GenesisBody{Origin: origin}}, nil
	}
}

func noteBuild(*ledger.Snapshot, time.Time) (*ledger.Draft, error) {
	return &ledger.Draft{Kind: "note", Body: lease.NoteBody{Text: "x"}}, nil
}

// BenchmarkVerifySigned is a full verify (from genesis) of 2,000 entries
// whose commits are SSH-signed with a key registered for their actor, so
// every signature is checked; "unsigned" is the same ledger without keys.
func BenchmarkVerifySigned(b *testing.B) {
	const n = 2000
	for _, signed := range []bool{true, false} {
		name := map[bool]string{true: "signed", false: "unsigned"}[signed]
		b.Run(name, func(b *testing.B) {
			dir := testrepo.New(b)
			var opt ledger.Options
			builds := []ledger.BuildFunc{genesisBuild("bench/signed")}
			if signed {
				priv, pub, err := identity.Generate("")
				if err != nil {
					b.Fatal(err)
				}
				if opt.Signer, err = identity.ParseSigner(priv, "key"); err != nil {
					b.Fatal(err)
				}
				key, _, _ := identity.NormalizeKey(pub)
				builds = append(builds, func(*ledger.Snapshot, time.Time) (*ledger.Draft, error) {
					return &ledger.Draft{Kind: "keys", Body: lease.KeysBody{Op: "add", Actor: actor, Key: key}}, nil
				})
			}
			for len(builds) < n {
				builds = append(builds, noteBuild)
			}
			l, err := ledger.Open(dir, opt)
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			if _, err := l.AppendBatch(actor, builds); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				rep, err := l.Verify(true)
				if err != nil || rep.Checked != n {
					b.Fatalf("verify: %+v, %v", rep, err)
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "entries/s")
		})
	}
}
