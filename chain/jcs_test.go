package chain

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

var jcsValid = []struct{ in, want string }{
	// RFC 8785 §3.2.3: sorting by UTF-16 code units puts U+1F600 (surrogates
	// D83D DE00) before U+FB33, unlike code point order.
	{`{
	   "\u20ac": "Euro Sign",
	   "\r": "Carriage Return",
	   "\ufb33": "Hebrew Letter Dalet With Dagesh",
	   "1": "One",
	   "\ud83d\ude00": "Emoji: Grinning Face",
	   "\u0080": "Control",
	   "\u00f6": "Latin Small Letter O With Diaeresis"
	}`, "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"ö\":\"Latin Small Letter O With Diaeresis\",\"€\":\"Euro Sign\",\"😀\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"},
	// RFC 8785 §3.2.2 without its non-integer numbers.
	{`{
	  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
	  "literals": [null, true, false]
	}`, `{"literals":[null,true,false],"string":"€$\u000f\nA'B\"\\\\\"/"}`},
	// Already sorted: no reordering, nested objects sorted independently.
	{`{"a":{"z":1,"y":[{"c":0,"b":-1}]},"b":[]}`, `{"a":{"y":[{"b":-1,"c":0}],"z":1},"b":[]}`},
	{` [ 1 , -2 ,0, 9007199254740991, -9007199254740991 ] `, `[1,-2,0,9007199254740991,-9007199254740991]`},
	{`{}`, `{}`}, {`[]`, `[]`}, {`""`, `""`}, {"\t\r\n null \n", `null`}, {`true`, `true`}, {`7`, `7`},
	// Escaping: short forms, lowercase \u00xx, literal everything else.
	{`"\u0000\u0001\u0008\u0009\u000A\u000b\u000C\u000D\u001f\u0020"`, `"\u0000\u0001\b\t\n\u000b\f\r\u001f "`},
	{`"\u007f\u2028\u2029\u00e9/<>&\u003c\ud800\udc00\uDBFF\uDFFF"`, "\"\u007f\u2028\u2029é/<>&<\U00010000\U0010FFFF\""},
	{`"\"\\\/\b\f\n\r\t"`, `"\"\\/\b\f\n\r\t"`},
	{"\"\u007f\u2028é😀\"", "\"\u007f\u2028é😀\""},
	// Keys sort by unescaped value: "\n" (0x0a) < "A" though `\n` > `A` escaped.
	{`{"A":1,"\n":2}`, `{"\n":2,"A":1}`},
	// UTF-16 order: U+10000 (D800 DC00) < U+E000 < U+FFFF; U+10000 < U+10001.
	{"{\"\uffff\":1,\"\ue000\":2,\"\U00010001\":3,\"\U00010000\":4,\"\":5,\"\u007f\":6}",
		"{\"\":5,\"\u007f\":6,\"\U00010000\":4,\"\U00010001\":3,\"\ue000\":2,\"\uffff\":1}"},
	// Prefix orders first.
	{`{"ab":1,"a":2,"":3}`, `{"":3,"a":2,"ab":1}`},
}

var jcsInvalid = []string{
	``, ` `, `{`, `[`, `"abc`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `[,1]`, `{,}`, `{1:2}`, `{'a':1}`,
	`nul`, `tru`, `truex`, `nan`, `NaN`, `Infinity`, `+1`, `1 2`, `{}{}`, `[] x`, "\x00", `"a"b`,
	// Numbers outside the integer subset.
	`1.0`, `1e2`, `1E2`, `0.5`, `-`, `-a`, `01`, `-01`, `00`, `-0`, `9007199254740992`, `-9007199254740992`,
	`12345678901234567890`, `[333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001]`,
	// Duplicates, including ones spelled differently or not adjacent.
	`{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `{"b":1,"a":2,"b":3}`, `{"x":{"a":1,"c":2,"a":3}}`,
	// Strings.
	"\"\x01\"", "\"a\nb\"", "\"\x7f\xff\"", "\"\xc3\"", "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"",
	`"\ud800"`, `"\udc00"`, `"\ud800\u0041"`, `"\ud800x"`, `"\udbff\ud800"`, `"\u12"`, `"\u12g4"`,
	`"\x"`, `"\'"`, `"\`, `"\u`, "{\"\xff\":1}",
	strings.Repeat("[", 65) + strings.Repeat("]", 65),
	strings.Repeat(`{"a":`, 65) + "1" + strings.Repeat("}", 65),
}

func TestCanonicalize(t *testing.T) {
	for _, tc := range jcsValid {
		got, err := Canonicalize([]byte(tc.in))
		if err != nil || string(got) != tc.want {
			t.Errorf("Canonicalize(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			continue
		}
		if again, err := Canonicalize(got); err != nil || !bytes.Equal(again, got) {
			t.Errorf("Canonicalize not idempotent on %q: %q, %v", got, again, err)
		}
		if !IsCanonical(got) {
			t.Errorf("IsCanonical(%q) = false", got)
		}
		if IsCanonical([]byte(tc.in)) != (tc.in == tc.want) {
			t.Errorf("IsCanonical(%q) = %v", tc.in, !(tc.in == tc.want))
		}
	}
}

func TestCanonicalizeEscapeTable(t *testing.T) {
	// Every BMP character as a \u escape becomes what JSON.stringify emits.
	for r := rune(0); r < 0x10000; r++ {
		if 0xD800 <= r && r < 0xE000 {
			continue
		}
		in := []byte(fmt.Sprintf(`"\u%04x"`, r))
		if r&1 == 1 {
			in = []byte(fmt.Sprintf(`"\u%04X"`, r))
		}
		var want string
		switch r {
		case '"':
			want = `"\""`
		case '\\':
			want = `"\\"`
		case '\b':
			want = `"\b"`
		case '\f':
			want = `"\f"`
		case '\n':
			want = `"\n"`
		case '\r':
			want = `"\r"`
		case '\t':
			want = `"\t"`
		default:
			if r < 0x20 {
				want = fmt.Sprintf(`"\u%04x"`, r)
			} else {
				want = `"` + string(r) + `"`
			}
		}
		if got, err := Canonicalize(in); err != nil || string(got) != want {
			t.Fatalf("Canonicalize(%s) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestCanonicalizeRejects(t *testing.T) {
	for _, in := range jcsInvalid {
		if got, err := Canonicalize([]byte(in)); err == nil {
			t.Errorf("Canonicalize(%q) = %q, want error", in, got)
		} else if !errors.Is(err, ErrInvalidJSON) {
			t.Errorf("Canonicalize(%q) error %v does not wrap ErrInvalidJSON", in, err)
		}
		if IsCanonical([]byte(in)) {
			t.Errorf("IsCanonical(%q) = true", in)
		}
	}
	// The depth limit is exactly 64.
	deep := strings.Repeat("[", 64) + strings.Repeat("]", 64)
	if _, err := Canonicalize([]byte(deep)); err != nil {
		t.Errorf("depth 64 rejected: %v", err)
	}
}

func TestMarshalCanonical(t *testing.T) {
	v := struct {
		Z string         `json:"z"`
		A map[string]int `json:"a"`
		H string         `json:"h"`
	}{"<&>\u2028", map[string]int{"b": 2, "a": 1}, "x"}
	got, err := MarshalCanonical(v)
	if want := "{\"a\":{\"a\":1,\"b\":2},\"h\":\"x\",\"z\":\"<&>\u2028\"}"; err != nil || string(got) != want {
		t.Errorf("MarshalCanonical = %q, %v; want %q", got, err, want)
	}
	if _, err := MarshalCanonical(0.5); err == nil {
		t.Error("MarshalCanonical(0.5) succeeded")
	}
}

func FuzzCanonicalize(f *testing.F) {
	for _, tc := range jcsValid {
		f.Add([]byte(tc.in))
	}
	for _, in := range jcsInvalid {
		f.Add([]byte(in))
	}
	f.Add([]byte(jcsBenchEntry))
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := Canonicalize(in)
		if err != nil {
			return
		}
		if !json.Valid(in) {
			t.Fatalf("accepted invalid JSON %q", in)
		}
		if again, err := Canonicalize(out); err != nil || !bytes.Equal(again, out) {
			t.Fatalf("output %q of %q is not canonical: %q, %v", out, in, again, err)
		}
		if !IsCanonical(out) || IsCanonical(in) != bytes.Equal(in, out) {
			t.Fatalf("IsCanonical disagrees on %q / %q", in, out)
		}
		if len(out) > len(in) {
			t.Fatalf("output %q longer than input %q", out, in)
		}
		var vin, vout any
		if err := json.Unmarshal(in, &vin); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(out, &vout); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(vin, vout) {
			t.Fatalf("%q and %q decode differently: %v vs %v", in, out, vin, vout)
		}
	})
}

const jcsBenchEntry = `{
  "v": 1, "seq": 123456, "kind": "grant", "ts": "2025-01-02T03:04:05.678Z",
  "prev": "5f0e7a7c3b1d2e4f60718293a4b5c6d7e8f90112233445566778899aabbccddee",
  "actor": "Ada Lovelace \u003cada@example.org\u003e", "nonce": "0123456789abcdef0123456789abcdef",
  "body": {"resource": "db/prod", "role": "reader", "until": 1767225600, "note": "on-call\n"}
}`

func BenchmarkCanonicalize(b *testing.B) {
	in := []byte(jcsBenchEntry)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Canonicalize(in); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkIsCanonical(b *testing.B) {
	in, err := Canonicalize([]byte(jcsBenchEntry))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if !IsCanonical(in) {
			b.Fatal("not canonical")
		}
	}
}
