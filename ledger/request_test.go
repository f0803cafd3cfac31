package ledger

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/tally-dev/tally/errs"
)

// TestRequestRefusalRoundTrip: the reason the sequencer writes gives back
// the refusal's code, message and details (numbers as their literal), also
// when the message itself holds " {" and a detail's text holds " {" or ": ".
func TestRequestRefusalRoundTrip(t *testing.T) {
	for _, c := range []struct {
		err     *errs.Error
		details map[string]any
	}{
		{errs.New(errs.NoReadyCell, "no cell is claimable now; 3 open cells wait for deps or leases").With("open", 3),
			map[string]any{"open": json.Number("3")}},
		{errs.New(errs.PusherDenied, "pusher bob {REMOTE_USER} may not push: entries of actor alice"), nil},
		{errs.New(errs.LeaseHeld, "held by {x} now").With("holder", "a {b}: c").With("n", 2),
			map[string]any{"holder": "a {b}: c", "n": json.Number("2")}},
	} {
		reason := RequestRefusal(c.err)
		got, ok := parseRequestRefusal(reason)
		want := &errs.Error{Code: c.err.Code, Message: c.err.Message, Details: c.details}
		if !ok || !reflect.DeepEqual(got, want) {
			t.Fatalf("%q read back as %#v, want %#v", reason, got, want)
		}
	}
	if _, ok := parseRequestRefusal("fail to run proc-receive hook"); ok {
		t.Fatal("a reason of git's own read as a refusal")
	}
}
