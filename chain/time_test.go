package chain

import (
	"testing"
	"time"
)

// TimeInRange accepts exactly the instants whose formatted form ParseTime
// reads back: years 1970..9999 in UTC, at millisecond precision, FirstTime
// to LastTime; RangeLimit names the end an instant outside lies beyond.
func TestTimeInRange(t *testing.T) {
	cases := []struct {
		t  time.Time
		in bool
	}{
		{time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC), true}, // truncated to .999
		{time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), false},
		{time.Date(9999, 12, 31, 23, 0, 0, 0, time.FixedZone("", -5*3600)), false}, // 10000-01-01T04:00Z
		{time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC), true},
		{time.Date(1970, 1, 1, 0, 30, 0, 0, time.FixedZone("", 3600)), false}, // 1969-12-31T23:30Z
		{time.Date(1969, 12, 31, 23, 59, 59, 999_999_999, time.UTC), false},   // a negative commit time
		{time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC), false},
		{time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC), true},
	}
	for _, c := range cases {
		s := FormatTime(c.t)
		_, err := ParseTime(s)
		if got := TimeInRange(c.t); got != c.in || (err == nil) != c.in {
			t.Errorf("%v: TimeInRange %v, ParseTime(%q) error %v; want in range %v", c.t, got, s, err, c.in)
		}
		if want := LastTime; !c.in {
			if c.t.UTC().Year() < 1970 {
				want = FirstTime
			}
			if got := RangeLimit(c.t); got != want {
				t.Errorf("%v: RangeLimit %s, want %s", c.t, got, want)
			}
		}
	}
	for _, s := range []string{FirstTime, LastTime} {
		if _, err := ParseTime(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	if first, _ := ParseTime(FirstTime); first.Unix() != 0 {
		t.Errorf("FirstTime is Unix %d, want 0", first.Unix())
	}
}
