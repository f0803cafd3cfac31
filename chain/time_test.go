package chain

import (
	"testing"
	"time"
)

// TimeInRange accepts exactly the instants whose formatted form ParseTime
// reads back: years 0000..9999 in UTC, at millisecond precision.
func TestTimeInRange(t *testing.T) {
	cases := []struct {
		t  time.Time
		in bool
	}{
		{time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC), true}, // truncated to .999
		{time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), false},
		{time.Date(9999, 12, 31, 23, 0, 0, 0, time.FixedZone("", -5*3600)), false}, // 10000-01-01T04:00Z
		{time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC), true},
		{time.Date(0, 1, 1, 0, 30, 0, 0, time.FixedZone("", 3600)), false}, // year -1 in UTC
		{time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC), true},
	}
	for _, c := range cases {
		s := FormatTime(c.t)
		_, err := ParseTime(s)
		if got := TimeInRange(c.t); got != c.in || (err == nil) != c.in {
			t.Errorf("%v: TimeInRange %v, ParseTime(%q) error %v; want in range %v", c.t, got, s, err, c.in)
		}
	}
	if _, err := ParseTime(LastTime); err != nil {
		t.Errorf("LastTime %q: %v", LastTime, err)
	}
}
