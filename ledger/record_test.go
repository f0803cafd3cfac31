package ledger_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/tally-dev/tally/internal/testrepo"
	"github.com/tally-dev/tally/ledger"
)

// The verify record is a cache of trust: a damaged or inconsistent record
// must never make verify skip entries; it is ignored and verify starts from
// genesis.
func TestVerifyRecordNeverBelieved(t *testing.T) {
	dir := testrepo.New(t)
	l, err := ledger.Open(dir, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Append("a", genesis()); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if _, err := l.Append("a", note("n")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Verify(false); err != nil {
		t.Fatal(err)
	}
	path := l.Files.Verified()
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	json.Unmarshal(good, &rec)
	head := testrepo.Git(t, dir, "rev-parse", "HEAD") // a commit that is not a ledger commit
	older := testrepo.Git(t, dir, "rev-parse", "refs/tally/ledger~2")
	for name, corrupt := range map[string]func() []byte{
		"truncated":        func() []byte { return good[:len(good)/2] },
		"edited hash":      func() []byte { r := clone(rec); r["hash"] = flipFirstHex(r["hash"].(string)); return marshal(r) },
		"other commit":     func() []byte { r := clone(rec); r["commit"] = head; return marshal(r) },
		"older, wrong seq": func() []byte { r := clone(rec); r["commit"] = older; return marshal(r) },
		"garbage":          func() []byte { return []byte("not json") },
	} {
		if err := os.WriteFile(path, corrupt(), 0o644); err != nil {
			t.Fatal(err)
		}
		rep, err := l.Verify(false)
		if err != nil {
			t.Fatalf("%s: verify failed: %v", name, err)
		}
		if !rep.StaleRecord || rep.Checked != 6 {
			t.Errorf("%s: stale=%v checked=%d, want the record ignored and all 6 entries checked", name, rep.StaleRecord, rep.Checked)
		}
		// The rewritten record is good again: the next run checks nothing new.
		if rep, err := l.Verify(false); err != nil || rep.StaleRecord || rep.Checked != 0 {
			t.Errorf("%s: after repair: %+v, %v", name, rep, err)
		}
	}
}

func clone(m map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

func marshal(v any) []byte { b, _ := json.Marshal(v); return b }

// flipFirstHex changes the first hex digit of h, so the edit is never a
// no-op (writing "00" over a hash that starts with 00 was one in 256 runs).
func flipFirstHex(h string) string {
	d := byte('0')
	if h[0] == '0' {
		d = '1'
	}
	return string(d) + h[1:]
}
