package lease

import (
	"strings"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
)

// The receipts index (FORMAT.md §6) lists, under the key of a commit
// (ReceiptKey) and of its tree (TreeKey), the receipts naming it, in seq
// order. Its *head* is the blob at the key. Under the chunked layout
// (ReceiptIndexChunked) the head holds at most ReceiptChunk receipts, and
// the later ones go to *chunks* 1, 2, … (chunkKey), each of at most
// ReceiptChunk, whose number is the *count* blob (chunkCountKey, absent
// while there is none). So a done reads and writes at most the count and
// one head or chunk of each index, whatever the receipts the commit has.
//
// Invariants, which ReadReceipts checks (CORRUPT otherwise):
//   - a head or chunk is {"receipts":[…]}, a count {"chunks":n} with n ≥ 1;
//   - with n chunks, chunks 1..n exist and n+1 does not; chunks 1..n-1 hold
//     exactly ReceiptChunk receipts, chunk n 1..ReceiptChunk; the head holds
//     at least ReceiptChunk (more only if it grew so before the switch);
//   - seqs increase strictly from the head's first to the last chunk's last.

// ReceiptIndex lists receipts naming one commit (or one tree): the content
// of a head or of a chunk blob.
type ReceiptIndex struct {
	Receipts []ReceiptRef `json:"receipts"`
}

// ReceiptRef points at a done entry.
type ReceiptRef struct {
	Seq    uint64 `json:"seq"`
	Wave   string `json:"wave"`
	Cell   string `json:"cell"`
	Epoch  int64  `json:"epoch"`
	Commit string `json:"commit"`
	Tree   string `json:"tree"`
}

// ReceiptChunk is the most receipts a head or a chunk holds under the
// chunked layout: a done decodes and encodes at most 16 receipts (≈ 3 KB)
// of each index. A done's rule costs ≈ 5 µs for each receipt of the blob
// it rewrites, per index, so the chunk size is its bound: 16 keeps the
// worst done under 0.2 ms (64 was ≈ 0.7 ms), at the price of a reader of
// a busy commit reading four times as many blobs, which it decodes anyway.
const ReceiptChunk = 16

// ReceiptKey is the state key of the receipts naming a commit.
func ReceiptKey(commit string) string { return "receipts/" + commit[:2] + "/" + commit }

// TreeKey is the state key of the receipts whose commit has the given tree.
func TreeKey(tree string) string { return "trees/" + tree[:2] + "/" + tree }

// chunksSuffix names the directory of a head's chunks beside it:
// "<key>.chunks/".
const chunksSuffix = ".chunks"

// chunkCountKey is the state key of the count of key's chunks.
func chunkCountKey(key string) string { return key + chunksSuffix + "/count" }

// chunkKey is the state key of chunk k ≥ 1 of the index at key: its hex
// path (chain.HexPath) in the chunk directory, "<key>.chunks/x1/0" for 16,
// so no directory of it holds more than 16 chunks and 16 subdirectories.
func chunkKey(key string, k int) string { return chain.HexPath(key+chunksSuffix, uint64(k)) }

// chunkCount is the count blob.
type chunkCount struct {
	Chunks int `json:"chunks"`
}

// IsChunkDir reports whether name, an entry of a receipts/<xx>/ or
// trees/<xx>/ directory as gitstore.Tree.List gives it (a directory with a
// trailing "/"), is the chunk directory of the head beside it, not a head.
func IsChunkDir(name string) bool {
	id, ok := strings.CutSuffix(name, chunksSuffix+"/")
	return ok && chain.IsLowerHex(id, 40)
}

// ReadReceipts returns the receipts indexed at key (ReceiptKey or TreeKey),
// in seq order: the head's, then each chunk's (empty when there are none).
// It is the one reader of a whole list: receipt show and verify, notes and
// the notes push rule read it here (the done rule reads only the count
// and the last blob, addReceipt). It reads every chunk, so its cost is
// the receipts the key has.
func ReadReceipts(kv chain.KV, key string) (*ReceiptIndex, error) {
	t := newTxn(kv)
	ix, _, err := t.receiptBlob(key)
	if err != nil {
		return nil, err
	}
	n, err := t.chunkCount(key)
	if err != nil {
		return nil, err
	}
	if n > 0 && len(ix.Receipts) < ReceiptChunk {
		return nil, errs.New(errs.Corrupt, "state %s: %d chunks after a head of %d receipts", key, n, len(ix.Receipts))
	}
	for k := 1; k <= n+1; k++ {
		c, ok, err := t.receiptBlob(chunkKey(key, k))
		switch {
		case err != nil:
			return nil, err
		case ok != (k <= n):
			return nil, errs.New(errs.Corrupt, "state %s: chunk %d present=%v with a count of %d", key, k, ok, n)
		case ok && (len(c.Receipts) == 0 || len(c.Receipts) > ReceiptChunk || k < n && len(c.Receipts) < ReceiptChunk):
			return nil, errs.New(errs.Corrupt, "state %s: chunk %d of %d holds %d receipts", key, k, n, len(c.Receipts))
		}
		ix.Receipts = append(ix.Receipts, c.Receipts...)
	}
	for i := 1; i < len(ix.Receipts); i++ {
		if ix.Receipts[i].Seq <= ix.Receipts[i-1].Seq {
			return nil, errs.New(errs.Corrupt, "state %s: receipt %d after %d", key, ix.Receipts[i].Seq, ix.Receipts[i-1].Seq)
		}
	}
	return ix, nil
}

// receiptBlob reads one head or chunk (empty and !ok when absent).
func (t *txn) receiptBlob(key string) (*ReceiptIndex, bool, error) {
	var ix ReceiptIndex
	ok, err := t.loadStrict(key, &ix)
	return &ix, ok, err
}

// chunkCount reads the number of chunks of the index at key (0 without a
// count blob).
func (t *txn) chunkCount(key string) (int, error) {
	var c chunkCount
	ok, err := t.loadStrict(chunkCountKey(key), &c)
	if err != nil {
		return 0, err
	}
	if ok && c.Chunks < 1 {
		return 0, errs.New(errs.Corrupt, "state %s: a count of %d chunks", chunkCountKey(key), c.Chunks)
	}
	return c.Chunks, nil
}

// addReceipt appends ref to the index at key. Under the single-blob layout
// (!chunked) the head takes it, however long it is. Under the chunked one
// it goes to the last chunk, or the head while there is none, if that holds
// fewer than ReceiptChunk; else to a new chunk, and the count moves on. It
// reads the count and one head or chunk, and writes one of them and at most
// the count.
func (t *txn) addReceipt(key string, ref ReceiptRef, chunked bool) error {
	n := 0
	if chunked {
		var err error
		if n, err = t.chunkCount(key); err != nil {
			return err
		}
	}
	last := key
	if n > 0 {
		last = chunkKey(key, n)
	}
	ix, ok, err := t.receiptBlob(last)
	if err != nil {
		return err
	}
	if n > 0 && (!ok || len(ix.Receipts) == 0 || len(ix.Receipts) > ReceiptChunk) {
		return errs.New(errs.Corrupt, "state %s: its last chunk, %d, is missing or holds %d receipts", key, n, len(ix.Receipts))
	}
	if !chunked || len(ix.Receipts) < ReceiptChunk {
		ix.Receipts = append(ix.Receipts, ref)
		return t.put(last, ix)
	}
	if err := t.put(chunkKey(key, n+1), &ReceiptIndex{Receipts: []ReceiptRef{ref}}); err != nil {
		return err
	}
	return t.put(chunkCountKey(key), &chunkCount{Chunks: n + 1})
}
