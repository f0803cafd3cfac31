package lease_test

// The receipts index under both layouts (FORMAT.md §6, "The receipts
// index"): the keys and bytes dones write, worked out here from the
// format's words rather than taken from the code under test, and the
// reader's refusal of every malformed index.

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/lease"
)

// perBlob is the most receipts FORMAT.md §6 lets a head or a chunk of the
// chunked index hold.
const perBlob = 16

// The index keys of commitA and treeA (which begin with 11 and 22).
const (
	commitIx = "receipts/11/" + commitA
	treeIx   = "trees/22/" + treeA
)

// hexPath is §3's path(N) under dir: N's hex digits, each but the last
// written "x<digit>/".
func hexPath(dir string, n int) string {
	d := fmt.Sprintf("%x", n)
	var b strings.Builder
	b.WriteString(dir + "/")
	for _, c := range d[:len(d)-1] {
		b.WriteString("x" + string(c) + "/")
	}
	return b.String() + d[len(d)-1:]
}

// refsJSON is the canonical {"receipts":[…]} of refs, members in JCS order.
func refsJSON(refs []lease.ReceiptRef) string {
	parts := make([]string, len(refs))
	for i, r := range refs {
		parts[i] = fmt.Sprintf(`{"cell":%q,"commit":%q,"epoch":%d,"seq":%d,"tree":%q,"wave":%q}`, r.Cell, r.Commit, r.Epoch, r.Seq, r.Tree, r.Wave)
	}
	return `{"receipts":[` + strings.Join(parts, ",") + `]}`
}

// receiptWorld is a ledger from its genesis (seq 0) with one wave "w" of
// cells c00000, c00001, … finished one by one on commitA.
type receiptWorld struct {
	*plWorld
	refs []lease.ReceiptRef // the receipts of commitA so far, in seq order
	next int                // the next cell to finish
}

// newReceiptWorld writes a genesis, switching to the chunked index if
// chunked, and a plan of cells cells.
func newReceiptWorld(t testing.TB, chunked bool, cells int) *receiptWorld {
	w := newPL(t)
	w.seq = 0
	g := chain.GenesisBody{Origin: "test"}
	if chunked {
		on := lease.ReceiptIndexChunked
		g.ReceiptIndex = &on
	}
	w.ok(chain.KindGenesis, "x", g)
	pcs := make([]lease.PlanCell, cells)
	for i := range pcs {
		pcs[i] = lease.PlanCell{ID: fmt.Sprintf("c%05d", i)}
	}
	w.ok(chain.KindPlan, "x", lease.PlanBody{Wave: "w", Cells: pcs})
	return &receiptWorld{plWorld: w}
}

// done claims and finishes the next cell on commitA, and returns the keys
// of the index (under receipts/ and trees/) the done changed, sorted.
func (w *receiptWorld) done() []string {
	w.t.Helper()
	id := fmt.Sprintf("c%05d", w.next)
	w.next++
	w.ok(chain.KindClaim, "a", claimB("w", id))
	w.refs = append(w.refs, lease.ReceiptRef{Seq: w.seq, Wave: "w", Cell: id, Epoch: 1, Commit: commitA, Tree: treeA})
	res := w.ok(chain.KindDone, "a", doneB("w", id, 1))
	var keys []string
	for k := range res.Changes {
		if strings.HasPrefix(k, "receipts/") || strings.HasPrefix(k, "trees/") {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// dones finishes n cells, requiring of each done that it changed one head
// or chunk of each index and, when it starts a chunk, that index's count:
// what FORMAT.md §5 bounds a done to.
func (w *receiptWorld) dones(n int, chunked bool) {
	w.t.Helper()
	for range n {
		keys := w.done()
		if len(keys) != 2 && len(keys) != 4 || len(keys) == 4 && !chunked {
			w.t.Fatalf("done %d changed the index keys %v", len(w.refs), keys)
		}
	}
}

// index returns the state's keys of the index of commitA and treeA.
func (w *receiptWorld) index() map[string]string {
	out := map[string]string{}
	for k, v := range w.kv {
		if strings.HasPrefix(k, "receipts/") || strings.HasPrefix(k, "trees/") {
			out[k] = string(v)
		}
	}
	return out
}

// wantIndex is the index FORMAT.md §6 prescribes for the receipts so far
// when the head holds the first head of them: the rest in chunks of
// perBlob, a
// count blob when there is a chunk; the same under both keys.
func (w *receiptWorld) wantIndex(head int) map[string]string {
	out := map[string]string{}
	for _, key := range []string{commitIx, treeIx} {
		out[key] = refsJSON(w.refs[:head])
		k := 0
		for from := head; from < len(w.refs); from += perBlob {
			k++
			out[hexPath(key+".chunks", k)] = refsJSON(w.refs[from:min(from+perBlob, len(w.refs))])
		}
		if k > 0 {
			out[key+".chunks/count"] = fmt.Sprintf(`{"chunks":%d}`, k)
		}
	}
	return out
}

// check requires the state's index to be wantIndex(head), and
// lease.ReadReceipts to read every receipt, in seq order, from both keys.
func (w *receiptWorld) check(head int) {
	w.t.Helper()
	got, want := w.index(), w.wantIndex(head)
	if !maps.Equal(got, want) {
		keys := slices.Sorted(maps.Keys(got))
		w.t.Fatalf("after %d receipts (head of %d): index keys %v, want %v\n(or a blob differs)", len(w.refs), head, keys, slices.Sorted(maps.Keys(want)))
	}
	for _, key := range []string{commitIx, treeIx} {
		ix, err := lease.ReadReceipts(w.kv, key)
		if err != nil || !slices.Equal(ix.Receipts, w.refs) {
			w.t.Fatalf("ReadReceipts(%s) after %d receipts: %d receipts, %v", key, len(w.refs), len(ix.Receipts), err)
		}
	}
}

// TestReceiptIndexChunked: a ledger whose genesis switches to the chunked
// index keeps each commit's first 16 receipts in the head, byte for byte
// what a ledger without the switch has, and the later ones in chunks of
// 16 under hex paths (chunk 16 is the first in a subdirectory, x1/0);
// every done changes one head or chunk of each index and, starting a
// chunk, its count.
func TestReceiptIndexChunked(t *testing.T) {
	if lease.ReceiptChunk != perBlob {
		t.Fatalf("lease.ReceiptChunk is %d; FORMAT.md §6 says %d", lease.ReceiptChunk, perBlob)
	}
	const total = perBlob*17 + 3
	w := newReceiptWorld(t, true, total)
	old := newReceiptWorld(t, false, perBlob)
	if got := string(w.kv["layout"]); got != `{"receipt_index":"chunked"}` {
		t.Fatalf("layout blob after the genesis %q", got)
	}
	if _, ok := old.kv["layout"]; ok {
		t.Fatal("a genesis without receipt_index wrote a layout blob")
	}
	for _, upTo := range []int{1, perBlob - 1, perBlob} {
		w.dones(upTo-len(w.refs), true)
		old.dones(upTo-len(old.refs), false)
		w.check(upTo)
		if !maps.Equal(w.index(), old.index()) {
			t.Fatalf("at %d receipts the chunked index differs from the single-blob one", upTo)
		}
	}
	for _, upTo := range []int{perBlob + 1, 2 * perBlob, 2*perBlob + 1, perBlob * 16, perBlob*16 + 1, perBlob*17 + 1, total} {
		w.dones(upTo-len(w.refs), true)
		w.check(perBlob)
	}
	if _, ok := w.kv[commitIx+".chunks/x1/0"]; !ok {
		t.Fatal("chunk 16 is not at .chunks/x1/0")
	}
}

// TestReceiptIndexSingle: without the switch a commit's receipts stay in
// one blob however many there are, as before the switch existed.
func TestReceiptIndexSingle(t *testing.T) {
	w := newReceiptWorld(t, false, 150)
	w.dones(150, false)
	w.check(150)
}

// TestReceiptIndexSwitchedMidway: a policy entry switches a ledger on. A
// head that grew past 16 before stays as it was, and later receipts go to
// chunks; a shorter head fills up to 16 first.
func TestReceiptIndexSwitchedMidway(t *testing.T) {
	for _, before := range []int{100, perBlob, perBlob - 6} {
		t.Run(fmt.Sprint(before), func(t *testing.T) {
			w := newReceiptWorld(t, false, before+140)
			w.dones(before, false)
			legacyHead := w.kv[commitIx]
			on := lease.ReceiptIndexChunked
			res := w.ok(chain.KindPolicy, "admin", lease.PolicySet{ReceiptIndex: &on})
			if res.Summary != "policy: set receipt_index" || len(res.Changes) != 1 || string(res.Changes["layout"]) != `{"receipt_index":"chunked"}` {
				t.Fatalf("the switch: %q, changes %v", res.Summary, slices.Sorted(maps.Keys(res.Changes)))
			}
			w.dones(140, true)
			head := max(before, perBlob)
			w.check(head)
			if before >= perBlob && string(w.kv[commitIx]) != string(legacyHead) {
				t.Fatal("the head written before the switch changed")
			}
		})
	}
}

// TestReceiptIndexSwitchOneWay: the switch takes one value, once; a
// genesis or policy body asking for anything else is USAGE.
func TestReceiptIndexSwitchOneWay(t *testing.T) {
	on, off, other := lease.ReceiptIndexChunked, "single", "Chunked"
	w := newReceiptWorld(t, true, 1)
	for _, v := range []*string{&on, &off, &other} {
		w.refuse(errs.Usage, chain.KindPolicy, "admin", lease.PolicySet{ReceiptIndex: v})
	}
	w.refuse(errs.Usage, chain.KindPolicy, "admin", `{"receipt_index":""}`)

	legacy := newReceiptWorld(t, false, 1)
	admins := []string{"admin"}
	legacy.ok(chain.KindPolicy, "admin", lease.PolicySet{Admins: &admins})
	legacy.refuse(errs.Policy, chain.KindPolicy, "mallory", lease.PolicySet{ReceiptIndex: &on})
	legacy.refuse(errs.Usage, chain.KindPolicy, "admin", lease.PolicySet{ReceiptIndex: &off})
	legacy.ok(chain.KindPolicy, "admin", lease.PolicySet{ReceiptIndex: &on})
	legacy.refuse(errs.Usage, chain.KindPolicy, "admin", lease.PolicySet{ReceiptIndex: &on})

	for _, body := range []string{`{"origin":"o","receipt_index":"single"}`, `{"origin":"o","receipt_index":""}`, `{"origin":"o","receipt_indx":"chunked"}`} {
		g := newPL(t)
		g.seq = 0
		g.refuse(errs.Usage, chain.KindGenesis, "x", body)
	}
}

// later returns n receipts with seqs after those of refs.
func later(refs []lease.ReceiptRef, n int) []lease.ReceiptRef {
	out := make([]lease.ReceiptRef, n)
	for i := range out {
		out[i] = refs[len(refs)-1]
		out[i].Seq += uint64(1000 + i)
	}
	return out
}

// TestReadReceiptsRefusesMalformed: each index the rules never write is
// CORRUPT to the reader (and to a done that reads it), whatever is wrong:
// a chunk missing, moved, over 16 or short before the last; a count that
// lies; a head short of 16 before chunks; an unknown member anywhere.
func TestReadReceiptsRefusesMalformed(t *testing.T) {
	w := newReceiptWorld(t, true, perBlob*3+6)
	w.dones(perBlob*3+5, true) // head 16, chunks 16, 16, 5
	w.check(perBlob)
	c := func(k int) string { return hexPath(commitIx+".chunks", k) }
	count := commitIx + ".chunks/count"
	// done: whether a done reads what is wrong (the layout, the count and
	// the last chunk) and so refuses it as well; the rest only a reader of
	// the whole index, or verify's comparison of the state, can see.
	cases := []struct {
		name   string
		done   bool
		mutate func(kv plKV)
	}{
		{"chunk missing", false, func(kv plKV) { delete(kv, c(2)) }},
		{"last chunk missing", true, func(kv plKV) { delete(kv, c(3)) }},
		{"chunks swapped", false, func(kv plKV) { kv[c(2)], kv[c(3)] = kv[c(3)], kv[c(2)] }},
		{"chunk over 16", true, func(kv plKV) { kv[c(3)] = []byte(refsJSON(append(w.refs[3*perBlob:], later(w.refs, 12)...))) }},
		{"chunk empty", true, func(kv plKV) { kv[c(3)] = []byte(`{"receipts":[]}`) }},
		{"chunk short", false, func(kv plKV) { kv[c(2)] = []byte(refsJSON(w.refs[2*perBlob : 3*perBlob-1])) }},
		{"chunk past the count", false, func(kv plKV) { kv[c(4)] = []byte(refsJSON(w.refs[:1])) }},
		{"count too high", true, func(kv plKV) { kv[count] = []byte(`{"chunks":4}`) }},
		{"count too low", false, func(kv plKV) { kv[count] = []byte(`{"chunks":2}`) }},
		{"count zero", true, func(kv plKV) { kv[count] = []byte(`{"chunks":0}`) }},
		{"count missing", false, func(kv plKV) { delete(kv, count) }},
		{"head short", false, func(kv plKV) { kv[commitIx] = []byte(refsJSON(w.refs[:perBlob-1])) }},
		{"seqs out of order", false, func(kv plKV) { kv[commitIx] = []byte(refsJSON(append(w.refs[1:perBlob:perBlob], w.refs[0]))) }},
		{"member in head", false, func(kv plKV) { kv[commitIx] = []byte(`{"chunks":3,` + string(kv[commitIx])[1:]) }},
		{"member in chunk", true, func(kv plKV) { kv[c(3)] = []byte(`{"more":1,` + string(kv[c(3)])[1:]) }},
		{"member in count", true, func(kv plKV) { kv[count] = []byte(`{"chunks":3,"last":5}`) }},
		{"member in a receipt", true, func(kv plKV) { kv[c(3)] = []byte(strings.Replace(string(kv[c(3)]), `"cell"`, `"x":1,"cell"`, 1)) }},
		{"member in layout", true, func(kv plKV) { kv["layout"] = []byte(`{"receipt_index":"chunked","v":2}`) }},
		{"layout of another value", true, func(kv plKV) { kv["layout"] = []byte(`{"receipt_index":"single"}`) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			kv := plKV{}
			maps.Copy(kv, w.kv)
			tc.mutate(kv)
			_, readErr := lease.ReadReceipts(kv, commitIx)
			_, layoutErr := lease.ReadLayout(kv)
			if errs.CodeOf(readErr) != errs.Corrupt && errs.CodeOf(layoutErr) != errs.Corrupt {
				t.Fatalf("read: %v; layout: %v; want CORRUPT", readErr, layoutErr)
			}
			if !tc.done {
				return
			}
			d := &receiptWorld{plWorld: &plWorld{t: t, kv: kv, seq: w.seq}, next: w.next}
			id := fmt.Sprintf("c%05d", d.next)
			d.ok(chain.KindClaim, "a", claimB("w", id))
			d.refuse(errs.Corrupt, chain.KindDone, "a", doneB("w", id, 1))
		})
	}
}
