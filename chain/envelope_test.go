package chain

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// The hand-written entry decoder and metadata encoder must agree with the
// generic canonical JSON path on every value.
func TestEnvelopeAgreesWithGenericJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	texts := []string{"", "plain", "quote \" and \\ back", "line\nbreak\ttab", "ünïcødé ✓ 𝄞", "ctl \x01\x1f", "</script>&"}
	for i := 0; i < 2000; i++ {
		body, _ := json.Marshal(map[string]any{"text": texts[rng.IntN(len(texts))], "n": rng.IntN(1000), "nested": map[string]any{"a": []any{1, "x}"}}})
		var prev Hash
		for j := range prev {
			prev[j] = byte(rng.IntN(256))
		}
		e := &Entry{V: 1, Seq: rng.Uint64N(1 << 50), Kind: "note", Prev: prev, TS: "2026-11-30T07:38:00.123Z",
			Actor: texts[rng.IntN(len(texts))] + "x", Nonce: "0123456789abcdef0123456789abcdef", Body: json.RawMessage(body)}
		raw, err := e.Encode()
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeEnvelope(raw)
		if err != nil {
			t.Fatalf("decode %s: %v", raw, err)
		}
		want := *e
		want.Body, _ = Canonicalize(body)
		if !reflect.DeepEqual(*got, want) {
			t.Fatalf("decode mismatch:\n got %+v\nwant %+v", *got, want)
		}
		m := &Meta{V: 1, Origin: texts[rng.IntN(len(texts))], Size: rng.Uint64N(1 << 40), Head: prev, TS: e.TS, Root: prev}
		for k := rng.IntN(5); k > 0; k-- {
			m.Range = append(m.Range, prev)
		}
		if m.Range == nil {
			m.Range = []Hash{}
		}
		fast, _ := m.Encode()
		generic, err := MarshalCanonical(m)
		if err != nil {
			t.Fatal(err)
		}
		if string(fast) != string(generic) {
			t.Fatalf("meta encoding differs:\n fast    %s\n generic %s", fast, generic)
		}
	}
}

func TestEnvelopeRejects(t *testing.T) {
	good := `{"actor":"a","body":{},"kind":"note","nonce":"0123456789abcdef0123456789abcdef","prev":"` +
		"0000000000000000000000000000000000000000000000000000000000000000" + `","seq":1,"ts":"2026-11-30T07:38:00.123Z","v":1}`
	if _, err := decodeEnvelope([]byte(good)); err != nil {
		t.Fatalf("good envelope refused: %v", err)
	}
	for _, bad := range []string{
		`{"actor":"a","body":{},"kind":"note","nonce":"x","prev":"00","seq":1,"ts":"t","v":1}`, // short prev
		good[:len(good)-1],                      // truncated
		good + " ",                              // trailing data
		`{"actor":"a","body":[],"kind":"note"}`, // body not an object, members missing
		`{"actor":"a","body":{},"extra":1,"kind":"note"}`, // unknown member
		`{"body":{},"actor":"a"}`,                         // wrong order
	} {
		if _, err := decodeEnvelope([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

func FuzzDecodeEnvelope(f *testing.F) {
	f.Add([]byte(`{"actor":"a","body":{},"kind":"note","nonce":"n","prev":"p","seq":1,"ts":"t","v":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := decodeEnvelope(b)
		if err == nil && e == nil {
			t.Fatal("nil entry without error")
		}
	})
}

// ParseTime is hand-written for speed; it must accept exactly what the
// standard library's layout round-trips, from the Unix epoch on.
func TestParseTimeAgreesWithTimePackage(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 20000; i++ {
		b := []byte(TimeLayout)
		for j := range b {
			if b[j] >= '0' && b[j] <= '9' {
				b[j] = byte('0' + rng.IntN(10))
			}
		}
		if rng.IntN(20) == 0 {
			b[rng.IntN(len(b))] = "0Z:-T.x"[rng.IntN(7)]
		}
		s := string(b)
		got, err := ParseTime(s)
		ref, rerr := time.Parse(TimeLayout, s)
		refOK := rerr == nil && ref.Format(TimeLayout) == s && ref.Unix() >= 0
		if (err == nil) != refOK || (refOK && !got.Equal(ref)) {
			t.Fatalf("ParseTime(%q) = %v, %v; time.Parse says %v, %v", s, got, err, ref, rerr)
		}
	}
}
