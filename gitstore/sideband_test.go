package gitstore

import (
	"reflect"
	"strings"
	"testing"
)

// TestSidebandLinesAsArriving: the server's messages cut into lines as the
// packets arrive, at any packet size, are the lines git prints (a line ends
// at a newline or a carriage return, trailing spaces go, a last
// unterminated piece stays); and a 100 KB range in git's 128-byte relays is
// copied once: a string a line and a buffer for the line in progress.
func TestSidebandLinesAsArriving(t *testing.T) {
	msg := "a  \r\nb\rc\n\n   \nlast  "
	want := []string{"a", "", "b", "c", "", "", "last"}
	for size := 1; size <= len(msg); size++ {
		var s sidebandLines
		for rest := msg; rest != ""; {
			n := min(size, len(rest))
			s.add([]byte(rest[:n]))
			rest = rest[n:]
		}
		if got := s.end(); !reflect.DeepEqual(got, want) {
			t.Fatalf("packets of %d bytes: lines %q, want %q", size, got, want)
		}
	}
	const lines = 10
	long := []byte(strings.Repeat(strings.Repeat("x", 10<<10)+"\n", lines))
	allocs := testing.AllocsPerRun(10, func() {
		var s sidebandLines
		for b := long; len(b) > 0; b = b[min(128, len(b)):] {
			s.add(b[:min(128, len(b))])
		}
		if got := s.end(); len(got) != lines || got[0] != string(long[:10<<10]) {
			t.Fatalf("%d lines, want %d of 10 KiB", len(got), lines)
		}
	})
	if allocs > lines+6 {
		t.Fatalf("%v allocations for %d lines, want at most %d", allocs, lines, lines+6)
	}
}
