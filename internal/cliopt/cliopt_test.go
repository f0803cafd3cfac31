package cliopt

import (
	"testing"

	"github.com/tally-dev/tally/errs"
)

// TALLY_NOW whose UTC time is outside the range an entry's time can carry
// (1970-01-01T00:00:00.000Z..9999-12-31T23:59:59.999Z) is USAGE before
// anything is written, with the end it passes as the "limit" detail; an
// offset that keeps it inside is fine.
func TestEnvClockRange(t *testing.T) {
	for _, tc := range []struct {
		now string
		ok  bool
	}{
		{"9999-12-31T23:59:59.999Z", true},
		{"9999-12-31T18:59:59.999-05:00", true},
		{"9999-12-31T23:00:00-05:00", false}, // 10000-01-01T04:00:00Z
		{"0000-01-01T00:30:00+01:00", false}, // year -1
		{"1970-01-01T00:00:00Z", true},
		{"1970-01-01T00:30:00+01:00", false}, // 1969-12-31T23:30:00Z
		{"0000-01-01T00:00:00.500Z", false},  // a negative commit time: git refuses it
	} {
		t.Setenv("TALLY_NOW", tc.now)
		clock, err := EnvClock()
		if tc.ok && (err != nil || clock().IsZero()) {
			t.Errorf("TALLY_NOW=%s: %v", tc.now, err)
		}
		if !tc.ok && !errs.Is(err, "USAGE") {
			t.Errorf("TALLY_NOW=%s: got %v, want USAGE", tc.now, err)
		}
		if limit := "1970-01-01T00:00:00.000Z"; !tc.ok && tc.now[:4] < "9999" && errs.From(err).Details["limit"] != limit {
			t.Errorf("TALLY_NOW=%s: limit %v, want %s", tc.now, errs.From(err).Details["limit"], limit)
		}
	}
}
