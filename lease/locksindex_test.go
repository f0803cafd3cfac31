package lease

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/tally-dev/tally/chain"
)

// indexBlobs are locks/index blobs as the rules write them (canonical
// JSON of a locksIndex), of 0 to 15 locks with names that need escapes and
// names that do not.
func indexBlobs(t testing.TB) [][]byte {
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
	return blobs
}

// FuzzDecodeLocksIndex: the hand-written reader of locks/index gives what
// json.Unmarshal gives on any bytes — the same value, or an error where it
// errs — and reads directly only what json.Unmarshal accepts. Seeded with
// the blobs the rules write and variations of them (escapes, white space,
// reordered or extra members, bad numbers, truncations).
func FuzzDecodeLocksIndex(f *testing.F) {
	blobs := indexBlobs(f)
	base := string(blobs[2])
	for _, b := range blobs {
		f.Add(b)
	}
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
		f.Add([]byte(v))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var want, got locksIndex
		wantErr := json.Unmarshal(b, &want)
		gotErr := decodeLocksIndex(b, &got)
		if (wantErr == nil) != (gotErr == nil) || wantErr == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("%q:\n got %+v %v\nwant %+v %v", b, got, gotErr, want, wantErr)
		}
		if _, fast := canonicalLocks(string(b)); fast && wantErr != nil {
			t.Errorf("%q: read directly, but json.Unmarshal refuses it: %v", b, wantErr)
		}
	})
}

// TestCanonicalLocksIndexReadDirectly: what the rules write (without
// escapes) takes the direct path, not the fallback — the reason the reader
// exists. An empty index ({"locks":null}) costs nothing either way.
func TestCanonicalLocksIndexReadDirectly(t *testing.T) {
	for _, b := range indexBlobs(t) {
		if _, fast := canonicalLocks(string(b)); !fast && !strings.ContainsAny(string(b), `\`) && string(b) != `{"locks":null}` {
			t.Errorf("a canonical blob without escapes was not read directly: %s", b)
		}
	}
}
