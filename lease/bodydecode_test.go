package lease

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/tally-dev/tally/chain"
)

// bodyTypes are the body types the rules decode (rule.body's callers).
var bodyTypes = []any{AnchorBody{}, NoteBody{}, ClaimBody{}, RenewBody{}, EpochBody{}, FailBody{}, CellRef{},
	DoneBody{}, LockBody{}, UnlockBody{}, WaitBody{}, BreakBody{}, planEntry{}, PolicySet{}, KeysBody{}, chain.GenesisBody{}}

// freshDecode is the decode rule.body made before decodeBody: a new strict
// decoder for each body.
func freshDecode(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// sameDecode requires decodeBody to give what freshDecode gives for body,
// into every body type: the same value and the same error.
func sameDecode(t *testing.T, body []byte) {
	t.Helper()
	for _, typ := range bodyTypes {
		rt := reflect.TypeOf(typ)
		want, got := reflect.New(rt), reflect.New(rt)
		werr, gerr := freshDecode(body, want.Interface()), decodeBody(body, got.Interface())
		if fmt.Sprint(werr) != fmt.Sprint(gerr) || !reflect.DeepEqual(want.Interface(), got.Interface()) {
			t.Fatalf("%s body %q: a fresh decoder gives %+v, %v; decodeBody gives %+v, %v",
				rt.Name(), body, want.Elem(), werr, got.Elem(), gerr)
		}
	}
}

// samePlainNote requires plainNoteText, where it reads body, to give the
// text the strict decode gives, without error.
func samePlainNote(t *testing.T, body []byte) {
	t.Helper()
	text, ok := plainNoteText(body)
	if !ok {
		return
	}
	var b NoteBody
	if err := freshDecode(body, &b); err != nil || b.Text != text {
		t.Fatalf("note body %q: plainNoteText gives %q; the strict decode %q, %v", body, text, b.Text, err)
	}
}

// bodySeeds are bodies every rule meets, good and bad: a zero value of each
// body type, and hand-made ones for what a strict decode must keep —
// encoding/json's case-insensitive field match, the refusal of unknown fields
// (nested too), type errors (which decode on past the bad field), and
// whatever follows the first value, which a decoder reused for the next
// body must not carry over.
func bodySeeds() [][]byte {
	var seeds [][]byte
	for _, typ := range bodyTypes {
		b, err := json.Marshal(typ)
		if err != nil {
			panic(err)
		}
		seeds = append(seeds, b)
	}
	for _, s := range []string{
		`{"text":"a note"}`, `{"TEXT":"upper"}`, `{"Text":"a","text":"b"}`, `{"text":"a","extra":1}`,
		`{"text":1}`, `{"text":"a","text":2}`, `{"text":"\u0000"}`, `{"text":"\ud800"}`, "{\"text\":\"\xff\"}",
		`{"text":"a"} {"text":"b"}`, `{"text":"a"}{"extra":1}`, `{"text":"a"}garbage`, `{"text":"a"}   `,
		` {"text":"a"}`, `{"text":"a"`, `{`, ``, `[]`, `null`, `"text"`, `7`, `{"text":null}`,
		`{"cell":{"wave":"w","id":"c","extra":true}}`, `{"epoch":18446744073709551616}`, `{"epoch":-1}`,
		`{"ttl_ms":1e3}`, `{"cells":[{"id":"a"},{"id":"b","bogus":0}]}`, `{"cells":{}}`,
		`{"ﬀ":1}`, `{"K":"x","k":"y"}`, `{"text":""}`, `{"text":"bench"}`, `{"text":"a\"}`, `{"text":"a"}}`,
		`{"text":"é"}`, "{\"text\":\"a\x7f\"}", "{\"text\":\"a\tb\"}", `{"text":"a"} `, `{"text":"\u0061"}`, `{"text":"a","x":"b"}`, `{"text":"` + strings.Repeat("x", maxPooledBody) + `"}`,
	} {
		seeds = append(seeds, []byte(s))
	}
	return seeds
}

// TestDecodeBodyMatchesFreshDecoder: decodeBody decodes each seed as a fresh
// decoder does, in one sequence, so a reused decoder that kept anything of
// the body before (buffered bytes, a sticky error, an offset) would diverge.
func TestDecodeBodyMatchesFreshDecoder(t *testing.T) {
	seeds := bodySeeds()
	plain := 0
	for range 2 {
		for _, s := range seeds {
			sameDecode(t, s)
			samePlainNote(t, s)
			if _, ok := plainNoteText(s); ok {
				plain++
			}
		}
	}
	if plain == 0 {
		t.Fatal("no seed is a plain note body")
	}
}

// FuzzDecodeBody compares decodeBody with a fresh decoder on any bytes, each
// between two decodes of a seed, which must be unaffected by it.
func FuzzDecodeBody(f *testing.F) {
	for _, s := range bodySeeds() {
		f.Add(s)
	}
	probe := []byte(`{"text":"after"}`)
	f.Fuzz(func(t *testing.T, body []byte) {
		sameDecode(t, probe)
		sameDecode(t, body)
		samePlainNote(t, body)
		sameDecode(t, probe)
	})
}
