package ledger

import (
	"errors"
	"strings"
	"testing"

	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
)

// A writer lock held past the timeout is CONFLICT (exit class 1, as
// before), and says who held it when the system told: the holder's pid and
// uid in the message and the details, or neither.
func TestWriterLockErrSaysWhoHolds(t *testing.T) {
	l := &Ledger{Ref: "refs/tally/ledger"}
	for _, tc := range []struct {
		held    gitstore.LockHeldError
		details map[string]any
		says    string
	}{
		{gitstore.LockHeldError{Path: "w.lock", PID: 42, UID: 1000}, map[string]any{"holder_pid": 42, "holder_uid": 1000}, "process 42 of uid 1000"},
		{gitstore.LockHeldError{Path: "w.lock", UID: -1}, nil, "does not say which"},
	} {
		e := errs.From(l.writerLockErr(&tc.held))
		if e.Code != errs.Conflict || e.Class() != errs.Retryable {
			t.Fatalf("%+v: %v, want CONFLICT", tc.held, e)
		}
		if !strings.Contains(e.Message, tc.says) {
			t.Fatalf("%+v: %q does not say %q", tc.held, e.Message, tc.says)
		}
		if len(e.Details) != len(tc.details) {
			t.Fatalf("%+v: details %v, want %v", tc.held, e.Details, tc.details)
		}
		for k, v := range tc.details {
			if e.Details[k] != v {
				t.Fatalf("%+v: details %v, want %v", tc.held, e.Details, tc.details)
			}
		}
	}
	other := errors.New("disk on fire")
	if err := l.writerLockErr(other); err != other {
		t.Fatalf("another error became %v", err)
	}
}
