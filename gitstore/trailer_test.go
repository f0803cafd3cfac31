package gitstore

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// splitTrailers is the definition of a message's trailers that Trailers
// and Trailer must keep: the "Key: value" lines of the last element of the
// message, trailing newlines trimmed, split at "\n\n"; none at all if a
// line of it is not one (a key holds no space or tab).
func splitTrailers(msg string) map[string]string {
	paras := strings.Split(strings.TrimRight(msg, "\n"), "\n\n")
	out := map[string]string{}
	for _, line := range strings.Split(paras[len(paras)-1], "\n") {
		k, v, ok := strings.Cut(line, ": ")
		if !ok || strings.ContainsAny(k, " \t") {
			return map[string]string{}
		}
		out[k] = v
	}
	return out
}

// Trailer and Trailers find what the definition finds, in messages built
// of the characters that matter (newlines in runs of every length, ": ",
// spaces and tabs in keys, repeated keys) and in the ledger's own shape.
func TestTrailerMatchesDefinition(t *testing.T) {
	msgs := []string{
		"", "\n", "\n\n", "Tally-Entry: x", "s\n\nTally-Seq: 1\nTally-Entry: ab\n",
		"s\n\n\nTally-Entry: ab\n", "s\n\n\n\nTally-Entry: ab", "s\n\nTally-Entry: a\nTally-Entry: b\n",
		"s\n\nTally Entry: a\n", "s\n\nTally-Entry:a\n", "s\n\nTally-Entry: a\n\n\n\n",
		"s\n\nA: 1\n\nTally-Entry: b", "s\n\nTally-Entry: a\n\nnot a trailer", "s\n\nK\t: v\nTally-Entry: e",
	}
	rng := rand.New(rand.NewPCG(3, 4))
	parts := []string{"\n", "\n", ": ", "Tally-Entry", "Tally-Seq", "a", " ", "\t", ":"}
	for range 20000 {
		var b strings.Builder
		for range rng.IntN(12) {
			b.WriteString(parts[rng.IntN(len(parts))])
		}
		msgs = append(msgs, b.String())
	}
	for _, msg := range msgs {
		want := splitTrailers(msg)
		got := Trailers(msg)
		if len(got) != len(want) {
			t.Fatalf("Trailers(%q) = %q, want %q", msg, got, want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Fatalf("Trailers(%q) = %q, want %q", msg, got, want)
			}
		}
		for _, key := range []string{"Tally-Entry", "Tally-Seq", "a"} {
			v, ok := Trailer(msg, key)
			if wv, wok := want[key]; v != wv || ok != wok {
				t.Fatalf("Trailer(%q, %q) = %q, %v; want %q, %v", msg, key, v, ok, wv, wok)
			}
		}
	}
}
