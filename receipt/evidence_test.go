package receipt_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/receipt"
)

// A receipt clears only the evidence files it read: a run recorded after
// them stays pending for the next receipt of the lease; the lease's
// directory goes once nothing is left in it.
func TestClearEvidenceKeepsLaterRuns(t *testing.T) {
	local := gitstore.LocalPathsOf(t.TempDir())
	save := func(argv string) {
		t.Helper()
		ev := lease.Evidence{Argv: []string{argv}, StartedAt: "2026-01-01T00:00:00.000Z", Epoch: 1}
		if err := receipt.SaveEvidence(local, "w", "c", ev); err != nil {
			t.Fatal(err)
		}
	}
	save("first")
	evs, taken, err := receipt.PendingEvidence(local, "w", "c", 1)
	if err != nil || len(evs) != 1 || len(taken) != 1 {
		t.Fatalf("pending: %v %v %v", evs, taken, err)
	}
	save("later")
	receipt.ClearEvidence(taken)
	evs, taken, err = receipt.PendingEvidence(local, "w", "c", 1)
	if err != nil || len(evs) != 1 || evs[0].Argv[0] != "later" {
		t.Fatalf("after clearing the first run: %v %v", evs, err)
	}
	receipt.ClearEvidence(taken)
	if _, err := os.Stat(filepath.Dir(taken[0])); !os.IsNotExist(err) {
		t.Fatalf("empty evidence directory left: %v", err)
	}
}
