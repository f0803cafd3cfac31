package lease

// Table tests of the anchor rule: lease.Apply on a map-backed state whose
// chain meta describes a ledger of 7 entries, with anchor bodies built by
// hand (as JSON text, so malformed ones can be written too).

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/zeebo/blake3"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
)

type anchorKV map[string][]byte

func (m anchorKV) Get(k string) ([]byte, bool, error) { v, ok := m[k]; return v, ok, nil }

func TestAnchorRule(t *testing.T) {
	root := chain.Hash(blake3.Sum256([]byte("root of 7")))
	meta := &chain.Meta{V: 1, Origin: "example/log", Size: 7, Root: root, Range: []chain.Hash{{1}, {2}, {3}}}
	mb, err := meta.Encode()
	if err != nil {
		t.Fatal(err)
	}
	state := anchorKV{chain.MetaKey: mb}
	const id = "0123456789abcdef0123456789abcdef01234567"
	cp := fmt.Sprintf(`{"origin":"example/log","size":7,"root":%q}`, root)
	body := func(refs, cp string) string { return `{"refs":` + refs + `,"checkpoint":` + cp + `}` }
	many := map[string]string{}
	for i := range 65 {
		many[fmt.Sprintf("refs/heads/b%d", i)] = id
	}
	manyJSON, _ := json.Marshal(many)
	other := chain.Hash(blake3.Sum256([]byte("another root")))
	for _, tc := range []struct {
		name, body string
		code       errs.Code
	}{
		{"one ref", body(`{"refs/heads/main":"`+id+`"}`, cp), ""},
		{"two refs", body(`{"refs/heads/main":"`+id+`","refs/tags/v1":"`+strings.Repeat("f", 40)+`"}`, cp), ""},
		{"no refs", body(`{}`, cp), "USAGE"},
		{"65 refs", body(string(manyJSON), cp), "USAGE"},
		{"short ref name", body(`{"main":"`+id+`"}`, cp), "USAGE"},
		{"ref ending in slash", body(`{"refs/heads/":"`+id+`"}`, cp), "USAGE"},
		{"ref with ..", body(`{"refs/heads/a..b":"`+id+`"}`, cp), "USAGE"},
		{"uppercase id", body(`{"refs/heads/main":"`+strings.ToUpper(id)+`"}`, cp), "USAGE"},
		{"short id", body(`{"refs/heads/main":"`+id[:39]+`"}`, cp), "USAGE"},
		{"sha256 id", body(`{"refs/heads/main":"`+id+id[:24]+`"}`, cp), "USAGE"},
		{"unknown member", `{"refs":{"refs/heads/main":"` + id + `"},"checkpoint":` + cp + `,"x":1}`, "USAGE"},
		{"no checkpoint", `{"refs":{"refs/heads/main":"` + id + `"}}`, "CHECKPOINT-INVALID"},
		{"wrong origin", body(`{"refs/heads/main":"`+id+`"}`, strings.Replace(cp, "example/log", "example/other", 1)), "CHECKPOINT-INVALID"},
		{"size of a later ledger", body(`{"refs/heads/main":"`+id+`"}`, strings.Replace(cp, `"size":7`, `"size":8`, 1)), "CHECKPOINT-INVALID"},
		{"size of an earlier ledger", body(`{"refs/heads/main":"`+id+`"}`, strings.Replace(cp, `"size":7`, `"size":6`, 1)), "CHECKPOINT-INVALID"},
		{"wrong root", body(`{"refs/heads/main":"`+id+`"}`, strings.Replace(cp, root.String(), other.String(), 1)), "CHECKPOINT-INVALID"},
		{"root not hex", body(`{"refs/heads/main":"`+id+`"}`, strings.Replace(cp, root.String(), "ab", 1)), "USAGE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &chain.Entry{V: 1, Seq: 7, Kind: "anchor", TS: "2026-01-01T00:00:00.000Z", Actor: "auditor",
				Nonce: strings.Repeat("0", 32), Body: json.RawMessage(tc.body)}
			res, err := Apply(state, e)
			if got := errs.CodeOf(err); got != tc.code {
				t.Fatalf("Apply: code %q (%v), want %q", got, err, tc.code)
			}
			if err != nil {
				if tc.code == "CHECKPOINT-INVALID" && !strings.Contains(tc.name, "no checkpoint") {
					d := errs.From(err).Details
					if d["ledger_size"] != uint64(7) {
						t.Errorf("details %v: want ledger_size 7", d)
					}
				}
				return
			}
			var b AnchorBody
			if err := json.Unmarshal([]byte(tc.body), &b); err != nil {
				t.Fatal(err)
			}
			var latest Anchor
			if err := json.Unmarshal(res.Changes["anchors/latest"], &latest); err != nil {
				t.Fatalf("anchors/latest: %v", err)
			}
			if latest.Seq != 7 || len(latest.Refs) != len(b.Refs) || latest.Checkpoint != b.Checkpoint {
				t.Errorf("anchors/latest = %+v, want seq 7 and the body's refs and checkpoint", latest)
			}
			if len(res.Changes) != 1+len(b.Refs) {
				t.Errorf("%d keys changed, want %d", len(res.Changes), 1+len(b.Refs))
			}
			for ref, want := range b.Refs {
				// the key is derived here independently of anchorRefKey
				sum := blake3.Sum256([]byte(ref))
				h := fmt.Sprintf("%x", sum)
				var a AnchoredRef
				if err := json.Unmarshal(res.Changes["anchors/refs/"+h[:2]+"/"+h], &a); err != nil {
					t.Fatalf("ref key of %s: %v", ref, err)
				}
				if a != (AnchoredRef{Ref: ref, Commit: want, Seq: 7}) {
					t.Errorf("ref state %+v", a)
				}
			}
			after := anchorKV{}
			for k, v := range state {
				after[k] = v
			}
			for k, v := range res.Changes {
				after[k] = v
			}
			if a, err := ReadAnchor(after); err != nil || a == nil || a.Seq != 7 {
				t.Errorf("ReadAnchor = %+v, %v", a, err)
			}
			if a, err := ReadAnchoredRef(after, "refs/heads/main"); err != nil || a == nil || a.Commit != id {
				t.Errorf("ReadAnchoredRef = %+v, %v", a, err)
			}
			if !strings.HasPrefix(res.Summary, "anchor refs/heads/main at 0123456789ab") {
				t.Errorf("summary %q", res.Summary)
			}
		})
	}
	if a, err := ReadAnchor(state); a != nil || err != nil {
		t.Errorf("ReadAnchor of a state without anchors = %+v, %v", a, err)
	}
}
