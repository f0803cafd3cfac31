package ledger

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tally-dev/tally/chain"
)

// TestCommitMessageIsFormatsSpelling: commitMessage writes what the Sprintf
// CommitFor used before it wrote, for summaries empty, long, multi-byte and
// with newlines, seqs from 0 to the largest, and hashes of every digit.
func TestCommitMessageIsFormatsSpelling(t *testing.T) {
	for i, summary := range []string{"", "note: x", "claim w/c1 → a1 (ttl 10m)", strings.Repeat("é", 300), "a\nb", "%d %s"} {
		for _, seq := range []uint64{0, 1, 9, 10, 123456789, 1<<64 - 1} {
			h := chain.LeafHash(chain.Hash{byte(i), byte(seq)})
			want := fmt.Sprintf("%s\n\nTally-Seq: %d\nTally-Entry: %s\n", summary, seq, h)
			if got := commitMessage(summary, seq, h); got != want {
				t.Fatalf("commitMessage(%q, %d, %s) = %q, want %q", summary, seq, h, got, want)
			}
		}
	}
}
