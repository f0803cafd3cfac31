package ledger_test

import (
	"testing"

	"github.com/tally-dev/tally/ledger"
)

// Sync tells its Progress how far the rebuild of local entries on a remote
// tip that moved has come: every 256 entries and at the end, in order.
func TestSyncRebuildProgress(t *testing.T) {
	_, _, lb := movedWhileOffline(t)
	const local = 300
	builds := make([]ledger.BuildFunc, local)
	for i := range builds {
		builds[i] = noteDraft("offline")
	}
	if _, err := lb.AppendBatch("B", builds); err != nil {
		t.Fatal(err)
	}
	var rebuilt []int
	lb.Progress = func(what string, done, total int) {
		if what == "rebuild" {
			if total != local {
				t.Errorf("rebuild progress %d of %d, want of %d", done, total, local)
			}
			rebuilt = append(rebuilt, done)
		}
	}
	rep, err := lb.Sync("origin")
	if err != nil || rep.Action != "rebuilt" || len(rep.Rebuilt) != local {
		t.Fatalf("sync: %v, %+v", err, rep)
	}
	if len(rebuilt) != 2 || rebuilt[0] != 256 || rebuilt[1] != local {
		t.Errorf("rebuild progress %v, want [256 %d]", rebuilt, local)
	}
}
