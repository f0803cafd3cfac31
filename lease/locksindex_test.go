package lease

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/tally-dev/tally/chain"
)

// TestDecodeLocksIndexAsJSON: the direct reader of locks/index gives what
// json.Unmarshal gives, on the blobs the rules write and on variations of
// them (escapes, white space, reordered or extra members, bad numbers,
// truncations), falling back to json.Unmarshal whenever the form is not
// exactly the canonical one.
func TestDecodeLocksIndexAsJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	names := []string{"a", "bot-1", "é/ü", "x y", `q"uote`, "back\\slash", "tab\there", "src/**", "*.go", "日本"}
	var blobs [][]byte
	for n := range 6 {
		var li locksIndex
		for range n * 3 {
			li.Locks = append(li.Locks, indexedLock{Pattern: names[rng.IntN(len(names))], Actor: names[rng.IntN(len(names))],
				Epoch: rng.Int64N(1 << 40), ExpiresAt: "2031-03-04T05:06:07.089Z"})
		}
		b, err := chain.MarshalCanonical(li)
		if err != nil {
			t.Fatal(err)
		}
		blobs = append(blobs, b)
	}
	base := string(blobs[2])
	for _, v := range []string{
		`{"locks":[]}`, `{"locks":null}`, `{}`, `{"locks":[{"actor":"a","epoch":1,"expires_at":"t","pattern":"p"}]}`,
		`{"locks":[{"actor":"a","epoch":01,"expires_at":"t","pattern":"p"}]}`,
		`{"locks":[{"actor":"a","epoch":+1,"expires_at":"t","pattern":"p"}]}`,
		`{"locks":[{"actor":"a","epoch":-0,"expires_at":"t","pattern":"p"}]}`,
		`{"locks":[{"actor":"a","epoch":1.5,"expires_at":"t","pattern":"p"}]}`,
		`{"locks":[{"actor":"a","epoch":1e3,"expires_at":"t","pattern":"p"}]}`,
		`{"locks":[{"actor":"a","epoch":99999999999999999999,"expires_at":"t","pattern":"p"}]}`,
		`{"locks":[{"actor":"a","epoch":1,"expires_at":"t","pattern":"p"},]}`,
		`{"locks":[{"actor":"a","epoch":1,"expires_at":"t","pattern":"p"}]} `,
		`{"locks":[{"actor":"a","epoch":1,"expires_at":"t","pattern":"p","x":1}]}`,
		`{"locks":[{"epoch":1,"actor":"a","expires_at":"t","pattern":"p"}]}`,
		`{"locks":[{"actor":"a\u0041","epoch":1,"expires_at":"t","pattern":"p"}]}`,
		"{\"locks\":[{\"actor\":\"a\x01\",\"epoch\":1,\"expires_at\":\"t\",\"pattern\":\"p\"}]}",
		"{\"locks\":[{\"actor\":\"\xff\",\"epoch\":1,\"expires_at\":\"t\",\"pattern\":\"p\"}]}",
		`{"locks":[{"actor":"a","epoch":1,"expires_at":"t","pattern":"p"}{"actor":"b","epoch":1,"expires_at":"t","pattern":"p"}]}`,
		strings.Replace(base, `,"epoch":`, `, "epoch":`, 1), base[:len(base)-1], base[:len(base)/2],
	} {
		blobs = append(blobs, []byte(v))
	}
	for _, b := range blobs {
		var want, got locksIndex
		wantErr := json.Unmarshal(b, &want)
		gotErr := decodeLocksIndex(b, &got)
		if (wantErr == nil) != (gotErr == nil) || wantErr == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v %v\nwant %+v %v", b, got, gotErr, want, wantErr)
		}
		if _, fast := canonicalLocks(string(b)); fast && wantErr != nil {
			t.Errorf("%s: read directly, but json.Unmarshal refuses it: %v", b, wantErr)
		}
	}
	for _, b := range blobs[:6] {
		if _, fast := canonicalLocks(string(b)); !fast && !strings.ContainsAny(string(b), `\`) && string(b) != `{"locks":null}` {
			t.Errorf("a canonical blob without escapes was not read directly: %s", b)
		}
	}
}
