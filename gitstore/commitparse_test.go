package gitstore

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// parseCommitSplit is ParseCommit as it was before it cut every string from
// one copy: the reference the test below holds it to.
func parseCommitSplit(data []byte) (*Commit, error) {
	c := &Commit{raw: data}
	header, msg, ok := strings.Cut(string(data), "\n\n")
	if !ok {
		return nil, errors.New("commit has no message separator")
	}
	c.Message = msg
	lines := strings.Split(header, "\n")
	for i := 0; i < len(lines); i++ {
		key, val, _ := strings.Cut(lines[i], " ")
		var err error
		switch key {
		case "tree":
			c.Tree, err = ParseObjectID(val)
		case "parent":
			var p ObjectID
			p, err = ParseObjectID(val)
			c.Parents = append(c.Parents, p)
		case "author":
			c.Author, err = parseIdent(val)
		case "committer":
			c.Committer, err = parseIdent(val)
		case "gpgsig":
			sig := []string{val}
			for i+1 < len(lines) && strings.HasPrefix(lines[i+1], " ") {
				i++
				sig = append(sig, lines[i][1:])
			}
			c.Signature = strings.Join(sig, "\n") + "\n"
		default:
			for i+1 < len(lines) && strings.HasPrefix(lines[i+1], " ") {
				i++
			}
		}
		if err != nil {
			return nil, fmt.Errorf("commit header %s: %w", key, err)
		}
	}
	if c.Tree.IsZero() {
		return nil, errors.New("commit has no tree")
	}
	return c, nil
}

// TestParseCommitMatchesSplit: ParseCommit gives what parseCommitSplit gives
// (the same commit or the same error) for commits as tally writes them,
// signed and not, with headers it does not model, continuation lines after
// every kind of header, and for every truncation and 2,000 random byte
// changes of each.
func TestParseCommitMatchesSplit(t *testing.T) {
	id := func(b byte) ObjectID { return ObjectID{b, 1, 2, 3} }
	who := Ident{Name: "agent-1", Email: "agent-1", When: 1764600000, TZ: "+0000"}
	sig := "-----BEGIN SSH SIGNATURE-----\nU1NIU0lH\nAAAA\n-----END SSH SIGNATURE-----\n"
	var samples [][]byte
	for _, c := range []*Commit{
		{Tree: id(1), Author: who, Committer: who, Message: "genesis\n\nTally-Seq: 0\nTally-Entry: ab\n"},
		{Tree: id(2), Parents: []ObjectID{id(3)}, Author: who, Committer: who, Message: "note: x\n\nTally-Seq: 1\n"},
		{Tree: id(4), Parents: []ObjectID{id(5)}, Author: who, Committer: who, Signature: sig, Message: "claim\n"},
		{Tree: id(6), Parents: []ObjectID{id(7), id(8)}, Author: who, Committer: who, Message: ""},
	} {
		samples = append(samples, c.Encode())
	}
	t1, t2 := id(9).String(), id(10).String()
	for _, s := range []string{
		"tree " + t1 + "\nencoding ISO-8859-1\nmergetag object " + t2 + "\n type commit\n tag v1\nauthor a <a> 1 +0000\ncommitter c <c> 2 +0100\n\nm",
		"tree " + t1 + "\n continued\nparent " + t2 + "\n more\nauthor a <a> 1 +0000\n x\ncommitter c <c> 2 +0000\n y\ngpgsig one\n two\n  three\n\nm\n\nbody\n",
		"tree " + t1 + "\ngpgsig only\n\n", "\n\nno header", "tree " + t1 + "\n", "tree " + t1 + "\n\n\n\n",
		"tree " + t1 + "\nauthor bad\n\nm", "tree " + t1 + "\ncommitter c <c> x +0000\n\nm", "parent " + t2 + "\n\nno tree",
		"tree " + t1[:39] + "\n\nshort", "tree " + t1 + " extra\n\nm", "", "\n", " \n\n",
	} {
		samples = append(samples, []byte(s))
	}
	same := func(data []byte) {
		t.Helper()
		want, werr := parseCommitSplit(data)
		got, gerr := ParseCommit(data)
		if fmt.Sprint(werr) != fmt.Sprint(gerr) || !reflect.DeepEqual(want, got) {
			t.Fatalf("commit %q:\nsplit gives %+v, %v\nParseCommit %+v, %v", data, want, werr, got, gerr)
		}
	}
	rng := rand.New(rand.NewPCG(15, 5))
	for _, s := range samples {
		same(s)
		for n := range len(s) {
			same(s[:n])
		}
		for range 2000 {
			b := []byte(string(s))
			for range 1 + rng.IntN(3) {
				if len(b) > 0 {
					b[rng.IntN(len(b))] = []byte("\n \x00a<>+0")[rng.IntN(8)]
				}
			}
			same(b)
		}
	}
}

// TestParseCommitAllocations: parsing a ledger commit (one parent, no
// signature) allocates the commit, its one copy of the object and its parent
// list: the copies of the header and of the message and the slice of header
// lines are gone.
func TestParseCommitAllocations(t *testing.T) {
	who := Ident{Name: "agent-1", Email: "agent-1", When: 1764600000, TZ: "+0000"}
	data := (&Commit{Tree: ObjectID{1}, Parents: []ObjectID{{2}}, Author: who, Committer: who,
		Message: "note: x\n\nTally-Seq: 1\nTally-Entry: ab\n"}).Encode()
	if n := testing.AllocsPerRun(100, func() { ParseCommit(data) }); n > 3 {
		t.Fatalf("ParseCommit made %v allocations, want 3", n)
	}
}
