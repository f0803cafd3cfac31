package ledger_test

import (
	"strings"
	"testing"

	"github.com/tally-dev/tally/internal/testrepo"
)

// A note's nonce is the 16 bytes of one getrandom system call, written into
// its entry as hex: not crypto/rand's vDSO path, whose first read faults in
// per-thread state and arms a timer that starts a thread. strace sees the
// call and the bytes it returned, which must be the entry's nonce.
func TestNonceFromGetrandomCall(t *testing.T) {
	t.Parallel()
	dir := initRepo(t)
	lines := tracedNote(t, dir, "nonce", "-xx", "-e", "trace=getrandom")
	var calls []string // the hex of each 16-byte getrandom
	for _, line := range lines {
		if _, rest, ok := strings.Cut(line, `getrandom("`); ok && strings.HasSuffix(line, ", 16, 0) = 16") {
			raw, _, _ := strings.Cut(rest, `"`)
			calls = append(calls, strings.ReplaceAll(raw, `\x`, ""))
		}
	}
	if len(calls) != 1 {
		t.Fatalf("the note made %d getrandom calls of 16 bytes, want 1:\n%s", len(calls), strings.Join(lines, "\n"))
	}
	entry := testrepo.Git(t, dir, "cat-file", "blob", ledgerRef+":entry")
	if want := `"nonce":"` + calls[0] + `"`; !strings.Contains(entry, want) {
		t.Errorf("entry %s does not carry the bytes getrandom returned (%s)", entry, want)
	}
}
