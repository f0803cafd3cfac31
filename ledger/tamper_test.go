package ledger_test

// Tamper tests: each builds a real ledger of ten entries, rewrites its history
// with git plumbing (cat-file, hash-object, ls-tree, mktree, update-ref) or
// gitstore's pack writer so that exactly one defect exists, and requires
// `tally verify --full --json` to exit 3 naming the defect's code and the seq
// of the first bad position. Commits after the tampered one are rewritten
// onto it with their trees, identities and messages kept byte for byte, so the
// only thing wrong with the history is the intended defect; every fixture is
// first verified clean, so the tampering is what the verifier reports.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/internal/testrepo"
	"github.com/tally-dev/tally/ledger"
)

// tamperFixture is a clean ten-entry ledger, verified once with --full.
func tamperFixture(t *testing.T) (string, []string, []chainEntry) {
	t.Helper()
	dir, commits := buildRepo(t, 10)
	entries := readChain(t, dir)
	checkChainLinks(t, entries)
	verifyOK(t, dir, true)
	return dir, commits, entries
}

// withEntryTrailer returns the raw commit with its Tally-Entry trailer set to hash.
func withEntryTrailer(t *testing.T, raw, hash string) string {
	t.Helper()
	i := strings.LastIndex(raw, "\nTally-Entry: ")
	if i < 0 {
		t.Fatalf("commit has no Tally-Entry trailer:\n%s", raw)
	}
	return raw[:i] + "\nTally-Entry: " + hash + "\n"
}

// replaceEntry rewrites commit k with entry bytes raw (the tree's entry blob
// replaced; the trailer updated if updateTrailer) and re-parents the later
// commits onto it; the ledger ref is moved to the new tip.
func replaceEntry(t *testing.T, dir string, commits []string, k int, raw []byte, updateTrailer bool) {
	t.Helper()
	c := catCommit(t, dir, commits[k])
	c = withTree(c, setBlob(t, dir, commitTree(c), ledger.EntryKey, raw))
	if updateTrailer {
		c = withEntryTrailer(t, c, entryHashHex(raw))
	}
	forceRef(t, dir, reparent(t, dir, writeObject(t, dir, "commit", []byte(c)), commits[k+1:]))
}

func TestTamperBodyEdited(t *testing.T) {
	t.Parallel()
	dir, commits, entries := tamperFixture(t)
	const k = 4
	raw := strings.Replace(string(entries[k].Raw), `"text":"note-4"`, `"text":"note-X"`, 1)
	if raw == string(entries[k].Raw) {
		t.Fatalf("fixture entry %d has no text note-4: %s", k, entries[k].Raw)
	}
	if _, err := chain.Decode([]byte(raw)); err != nil {
		t.Fatalf("edited entry must stay canonical and well-formed: %v", err)
	}
	replaceEntry(t, dir, commits, k, []byte(raw), false)
	verifyFails(t, dir, "HASH-MISMATCH", k, "--full")
	// with a verified record below the rewrite it is a fork; a clone that has
	// never verified replays from genesis and finds the defect itself
	verifyFails(t, dir, "FORK-DETECTED", -1)
	if err := os.Remove(filepath.Join(gitDir(t, dir), "tally", "verified")); err != nil {
		t.Fatal(err)
	}
	verifyFails(t, dir, "HASH-MISMATCH", k)
}

func TestTamperEntryDropped(t *testing.T) {
	t.Parallel()
	dir, commits, _ := tamperFixture(t)
	const k = 5
	forceRef(t, dir, reparent(t, dir, commits[k-1], commits[k+1:]))
	if n := len(revList(t, dir, ledgerRef)); n != len(commits)-1 {
		t.Fatalf("history has %d commits after dropping one of %d", n, len(commits))
	}
	verifyFails(t, dir, "SEQ-GAP", k, "--full")
}

func TestTamperEntriesSwapped(t *testing.T) {
	t.Parallel()
	dir, commits, _ := tamperFixture(t)
	const k = 3
	c := reparent(t, dir, commits[k-1], []string{commits[k+1], commits[k]})
	forceRef(t, dir, reparent(t, dir, c, commits[k+2:]))
	verifyFails(t, dir, "SEQ-GAP", k, "--full")
}

func TestTamperNoncanonical(t *testing.T) {
	t.Parallel()
	variants := map[string]func(canon string) string{
		// JCS orders members by name: "v" last; put it first.
		"reordered-keys": func(s string) string {
			return `{"v":1,` + strings.TrimSuffix(strings.TrimPrefix(s, "{"), `,"v":1}`) + "}"
		},
		"added-whitespace": func(s string) string { return strings.Replace(s, `,"kind":`, `, "kind": `, 1) },
		"trailing-newline": func(s string) string { return s + "\n" },
		"escaped-char":     func(s string) string { return strings.Replace(s, `"text":"note`, `"text":"\u006eote`, 1) },
	}
	for name, mutate := range variants {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir, commits, entries := tamperFixture(t)
			const k = 6
			canon := string(entries[k].Raw)
			raw := mutate(canon)
			if raw == canon {
				t.Fatalf("mutation did nothing to %s", canon)
			}
			var a, b any
			if err := json.Unmarshal([]byte(canon), &a); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(raw), &b); err != nil || !reflect.DeepEqual(a, b) {
				t.Fatalf("mutated bytes must mean the same: %s vs %s (%v)", raw, canon, err)
			}
			replaceEntry(t, dir, commits, k, []byte(raw), true)
			verifyFails(t, dir, "NONCANONICAL", k, "--full")
		})
	}
}

func TestTamperTimeReversed(t *testing.T) {
	t.Parallel()
	dir, commits, entries := tamperFixture(t)
	const k = 5

	// The builder reproduces the writer exactly: rebuilding entry k unchanged
	// on its parent gives the very same commit. So what differs below is only
	// the timestamp.
	if same, _ := buildEntryCommit(t, dir, commits[k-1], decodeEntry(t, entries[k].Raw), nil); same != commits[k] {
		t.Fatalf("rebuilding entry %d gives commit %s, the writer made %s", k, same, commits[k])
	}

	prevTS, err := chain.ParseTime(entries[k-1].TS)
	if err != nil {
		t.Fatal(err)
	}
	e := decodeEntry(t, entries[k].Raw)
	e.TS = chain.FormatTime(prevTS.Add(-1500 * time.Millisecond))
	// Step refuses a reversed timestamp, so give it a parent state whose meta
	// says ts = e.TS; the meta after the step (and so the tree) is what a
	// well-chained entry at that time produces: only ts, from the entry, differs.
	backdate := func(tr *gitstore.Tree) {
		b, ok, err := tr.Get(chain.MetaKey)
		if err != nil || !ok {
			t.Fatalf("parent has no meta: %v", err)
		}
		m, err := chain.DecodeMeta(b, true)
		if err != nil {
			t.Fatal(err)
		}
		m.TS = e.TS
		if b, err = m.Encode(); err != nil {
			t.Fatal(err)
		}
		if err := tr.Set(chain.MetaKey, b); err != nil {
			t.Fatal(err)
		}
	}
	c, h := buildEntryCommit(t, dir, commits[k-1], e, backdate)
	forceRef(t, dir, relink(t, dir, c, h, entries[k+1:]))

	got := readChain(t, dir)
	checkChainLinks(t, got) // well chained: seq, prev and trailers all right
	if !(got[k].TS < got[k-1].TS) || got[k].Prev != entryHashHex(entries[k-1].Raw) {
		t.Fatalf("entry %d: ts %s prev %s; predecessor ts %s", k, got[k].TS, got[k].Prev, got[k-1].TS)
	}
	verifyFails(t, dir, "TIME-REVERSED", k, "--full")
}

func TestTamperStateMismatch(t *testing.T) {
	t.Parallel()
	const k = 7
	cases := map[string]func(t *testing.T, dir, tree string) string{
		"meta": func(t *testing.T, dir, tree string) string {
			m, err := chain.DecodeMeta([]byte(gitIn(t, dir, nil, "cat-file", "blob", tree+":meta")), true)
			if err != nil {
				t.Fatal(err)
			}
			m.Origin += "-forged"
			b, err := m.Encode()
			if err != nil {
				t.Fatal(err)
			}
			return setBlob(t, dir, tree, chain.MetaKey, b)
		},
		"tile": func(t *testing.T, dir, tree string) string {
			// flip one bit of entry 2's record in the level-0 tile
			l := openLedger(t, dir)
			db, err := l.Repo.Objects()
			if err != nil {
				t.Fatal(err)
			}
			id, _ := gitstore.ParseObjectID(tree)
			tr := gitstore.NewTree(db, id)
			path := chain.TilePath(0, 0)
			b, ok, err := tr.Get(path)
			if err != nil || !ok || len(b) < 3*52 {
				t.Fatalf("tile %s: %d bytes, %v %v", path, len(b), ok, err)
			}
			b = append([]byte(nil), b...)
			b[2*52+5] ^= 1
			if err := tr.Set(path, b); err != nil {
				t.Fatal(err)
			}
			pw := gitstore.NewPackWriter()
			nt, err := tr.Hash(pw)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := pw.WriteTo(l.Repo.ObjectDir); err != nil {
				t.Fatal(err)
			}
			return nt.String()
		},
		"extra-state-blob": func(t *testing.T, dir, tree string) string {
			var in strings.Builder
			in.WriteString(gitIn(t, dir, nil, "ls-tree", tree) + "\n")
			fmt.Fprintf(&in, "100644 blob %s\tplan\n", writeObject(t, dir, "blob", []byte(`{"waves":["w9"]}`)))
			return gitIn(t, dir, []byte(in.String()), "mktree")
		},
	}
	for name, forge := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir, commits, _ := tamperFixture(t)
			c := catCommit(t, dir, commits[k])
			nt := forge(t, dir, commitTree(c))
			if nt == commitTree(c) {
				t.Fatal("forged tree equals the original")
			}
			forceRef(t, dir, reparent(t, dir, writeObject(t, dir, "commit", []byte(withTree(c, nt))), commits[k+1:]))
			fsck(t, dir)
			verifyFails(t, dir, "STATE-MISMATCH", k, "--full")
		})
	}
}

func TestTamperMergeCommit(t *testing.T) {
	t.Parallel()
	for name, second := range map[string]func(t *testing.T, dir string, commits []string) string{
		"code-branch":   func(t *testing.T, dir string, _ []string) string { return testrepo.Git(t, dir, "rev-parse", "main") },
		"ledger-commit": func(_ *testing.T, _ string, commits []string) string { return commits[1] },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir, commits, _ := tamperFixture(t)
			const k = 4
			merge := writeObject(t, dir, "commit", []byte(withParents(catCommit(t, dir, commits[k]), commits[k-1], second(t, dir, commits))))
			forceRef(t, dir, reparent(t, dir, merge, commits[k+1:]))
			fsck(t, dir)
			verifyFails(t, dir, "HISTORY-NONLINEAR", k, "--full")
		})
	}
}

func TestTamperLinkBroken(t *testing.T) {
	t.Parallel()
	dir, commits, entries := tamperFixture(t)
	const k = 6
	e := decodeEntry(t, entries[k].Raw)
	e.Prev, _ = chain.ParseHash(entryHashHex(entries[k-2].Raw))
	raw, err := e.Encode()
	if err != nil {
		t.Fatal(err)
	}
	replaceEntry(t, dir, commits, k, raw, true)
	verifyFails(t, dir, "LINK-BROKEN", k, "--full")
}

func TestTamperCommitMismatch(t *testing.T) {
	t.Parallel()
	for name, forge := range map[string]func(header []string) []string{
		"committer": func(h []string) []string {
			for i, line := range h {
				if strings.HasPrefix(line, "committer ") {
					h[i] = "committer mallory <mallory> 1 +0000"
				}
			}
			return h
		},
		"extra-header": func(h []string) []string { return append(h, "encoding ISO-8859-1") },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir, commits, _ := tamperFixture(t)
			const k = 3
			c := catCommit(t, dir, commits[k])
			header, msg, _ := strings.Cut(c, "\n\n")
			forged := strings.Join(forge(strings.Split(header, "\n")), "\n") + "\n\n" + msg
			if forged == c {
				t.Fatal("forgery changed nothing")
			}
			forceRef(t, dir, reparent(t, dir, writeObject(t, dir, "commit", []byte(forged)), commits[k+1:]))
			fsck(t, dir)
			verifyFails(t, dir, "COMMIT-MISMATCH", k, "--full")
		})
	}
}

func TestTamperRuleViolation(t *testing.T) {
	t.Parallel()
	dir, commits, entries := tamperFixture(t)
	const k = 8
	e := decodeEntry(t, entries[k].Raw)
	e.Body = json.RawMessage(`{"text":""}`) // a note must have 1..4096 bytes of text
	raw, err := e.Encode()
	if err != nil {
		t.Fatal(err)
	}
	replaceEntry(t, dir, commits, k, raw, true)
	r := verifyFails(t, dir, "RULE-VIOLATION", k, "--full")
	if rule := r.JSON["error"].(map[string]any)["rule"]; rule != "USAGE" {
		t.Errorf("rule detail %v, want USAGE: %s", rule, r.Stdout)
	}
}

// --- incremental verification ---

func readRecord(t *testing.T, dir string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(gitDir(t, dir), "tally", "verified"))
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatalf("verified record %q: %v", b, err)
	}
	return rec
}

func TestVerifyIncrementalForkDetected(t *testing.T) {
	t.Parallel()
	dir, commits, entries := tamperFixture(t) // verified: the record is the tip
	if rec := readRecord(t, dir); rec["commit"] != commits[9] || rec["seq"] != 9.0 || rec["hash"] != entryHashHex(entries[9].Raw) {
		t.Fatalf("verified record %v, want commit %s seq 9", rec, commits[9])
	}
	// Rewrite entry 3 and everything after it into a chain that is valid on
	// its own (verify --full accepts it) but is not the history verified.
	const k = 3
	e := decodeEntry(t, entries[k].Raw)
	e.Body = json.RawMessage(`{"text":"rewritten"}`)
	c, h := buildEntryCommit(t, dir, commits[k-1], e, nil)
	forged := relink(t, dir, c, h, entries[k+1:])
	forceRef(t, dir, forged)
	for range 2 { // a failed verify does not move the record
		r := verifyFails(t, dir, "FORK-DETECTED", -1)
		if v := r.JSON["error"].(map[string]any)["verified_size"]; v != 10.0 {
			t.Errorf("verified_size %v, want 10", v)
		}
	}
	// The writer refuses to extend the fork; one made longer than the
	// verified history by other means is still a fork.
	l := openLedger(t, dir)
	if _, err := l.Append("forger", noteDraft("longer")); errs.CodeOf(err) != "FORK-DETECTED" {
		t.Fatalf("append on a fork: %v, want FORK-DETECTED", err)
	}
	p, err := l.Prepare("forger", noteDraft("longer"))
	if err != nil {
		t.Fatal(err)
	}
	forceRef(t, dir, p.Commit.String())
	verifyFails(t, dir, "FORK-DETECTED", -1)
	// Only the record makes the rewrite detectable: from genesis it is valid.
	verifyOK(t, dir, true)
}

func TestVerifyIncrementalRollbackDetected(t *testing.T) {
	t.Parallel()
	dir, commits, _ := tamperFixture(t)
	forceRef(t, dir, commits[6])
	r := verifyFails(t, dir, "ROLLBACK-DETECTED", -1)
	if v := r.JSON["error"].(map[string]any)["verified_size"]; v != 10.0 {
		t.Errorf("verified_size %v, want 10", v)
	}
	verifyFails(t, dir, "ROLLBACK-DETECTED", -1)
	forceRef(t, dir, commits[9])
	if j := verifyOK(t, dir, false); j["checked"] != 0.0 || j["entries"] != 10.0 {
		t.Fatalf("back at the verified tip: %v", j)
	}
}

func TestVerifyIncrementalChecksOnlyNew(t *testing.T) {
	t.Parallel()
	dir, _, _ := tamperFixture(t)
	const added = 7
	for i := range added {
		if r := testrepo.Run(t, dir, "agent", nil, "note", fmt.Sprintf("new-%d", i)); r.Code != 0 {
			t.Fatalf("tally note: exit %d %s", r.Code, r.Stderr)
		}
	}
	j := verifyOK(t, dir, false)
	if j["checked"] != float64(added) || j["entries"] != float64(10+added) {
		t.Fatalf("incremental verify after %d appends: %v", added, j)
	}
	if j := verifyOK(t, dir, false); j["checked"] != 0.0 {
		t.Fatalf("second incremental verify checked %v entries, want 0", j["checked"])
	}
	if j := verifyOK(t, dir, true); j["checked"] != float64(10+added) {
		t.Fatalf("verify --full checked %v entries, want %d", j["checked"], 10+added)
	}
}

// An incremental verify still checks every new entry: a defect above the
// verified tip is found, at its seq.
func TestVerifyIncrementalFindsNewDefect(t *testing.T) {
	t.Parallel()
	dir, _, _ := tamperFixture(t)
	l := openLedger(t, dir)
	for i := range 6 {
		if _, err := l.Append("agent", noteDraft(fmt.Sprintf("more-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	commits := revList(t, dir, ledgerRef)
	entries := readChain(t, dir)
	const k = 13
	raw := strings.Replace(string(entries[k].Raw), `"text":"more-3"`, `"text":"more-X"`, 1)
	replaceEntry(t, dir, commits, k, []byte(raw), false)
	verifyFails(t, dir, "HASH-MISMATCH", k)
}

// TestWriterRefusesUnverifiedChain: a writer never extends a ledger that
// does not verify. With the tip entry rewritten by hand, `tally note` is
// refused with the verifier's integrity code (exit 3) and the ref stays
// where the tampering left it: HASH-MISMATCH at the entry in a clone that
// never verified or wrote, FORK-DETECTED in one whose records saw the real
// history.
func TestWriterRefusesUnverifiedChain(t *testing.T) {
	t.Parallel()
	dir, commits, entries := tamperFixture(t)
	const k = 9 // the tip
	raw := strings.Replace(string(entries[k].Raw), `"text":"note-9"`, `"text":"note-X"`, 1)
	replaceEntry(t, dir, commits, k, []byte(raw), false)
	tampered := tip(t, dir)
	refused := func(code string) {
		t.Helper()
		r := testrepo.Run(t, dir, "agent", nil, "--json", "note", "on top")
		e, _ := r.JSON["error"].(map[string]any)
		if r.Code != 3 || e["code"] != code || !strings.Contains(e["message"].(string), "refusing to append") {
			t.Fatalf("note on a tampered ledger: exit %d %s, want %s", r.Code, r.Stdout, code)
		}
		if got := tip(t, dir); got != tampered {
			t.Fatalf("the refused append moved the ledger to %s", got)
		}
	}
	refused("FORK-DETECTED")
	for _, record := range []string{"verified", "appended"} { // a clone that never verified or wrote
		if err := os.Remove(filepath.Join(gitDir(t, dir), "tally", record)); err != nil {
			t.Fatal(err)
		}
	}
	refused("HASH-MISMATCH")
	if r := testrepo.Run(t, dir, "agent", nil, "--json", "note", "on top"); r.JSON["error"].(map[string]any)["seq"] != float64(k) {
		t.Fatalf("the refusal does not name seq %d: %s", k, r.Stdout)
	}
}

// TestViewsRefuseUnverifiedChain: a view answers only from a state that
// verifies. On an intact ledger every view's --json names the verified
// state it read ("verified": through the tip seq, with its hash); after the
// tip entry is rewritten by hand, status, show, next, log and locks all
// refuse with the verifier's integrity code (exit 3) instead of answering
// from it: FORK-DETECTED in a clone whose record saw the real tip,
// HASH-MISMATCH at the entry in a clone with no record.
func TestViewsRefuseUnverifiedChain(t *testing.T) {
	t.Parallel()
	dir, _, _ := tamperFixture(t)
	if r := testrepo.Run(t, dir, "agent", nil, "--json", "plan", remotePlanFile(t, "w", "a", "b")); r.Code != 0 {
		t.Fatalf("plan: exit %d %s", r.Code, r.Stdout)
	}
	if r := testrepo.Run(t, dir, "agent", nil, "--json", "note", "the tip"); r.Code != 0 {
		t.Fatalf("note: exit %d %s", r.Code, r.Stdout)
	}
	entries := readChain(t, dir)
	k := len(entries) - 1
	views := [][]string{{"status"}, {"show", "w/a"}, {"next"}, {"log"}, {"locks"}}
	for _, v := range views {
		r := testrepo.Run(t, dir, "agent", nil, append([]string{"--json"}, v...)...)
		ver, _ := r.JSON["verified"].(map[string]any)
		if r.Code != 0 || ver["through"] != float64(k) || ver["head"] != entryHashHex(entries[k].Raw) {
			t.Fatalf("%v on an intact ledger: exit %d, verified %v, want through %d: %s", v, r.Code, ver, k, r.Stdout)
		}
	}
	commits := revList(t, dir, ledgerRef)
	raw := strings.Replace(string(entries[k].Raw), `"text":"the tip"`, `"text":"the tap"`, 1)
	replaceEntry(t, dir, commits, k, []byte(raw), false)
	refused := func(code string) {
		t.Helper()
		for _, v := range views {
			r := testrepo.Run(t, dir, "agent", nil, append([]string{"--json"}, v...)...)
			e, _ := r.JSON["error"].(map[string]any)
			if r.Code != 3 || e["code"] != code || !strings.Contains(e["message"].(string), "does not verify") {
				t.Fatalf("%v on a tampered ledger: exit %d %s, want %s", v, r.Code, r.Stdout, code)
			}
			if code == "HASH-MISMATCH" && e["seq"] != float64(k) {
				t.Fatalf("%v: the refusal does not name seq %d: %s", v, k, r.Stdout)
			}
			if h := testrepo.Run(t, dir, "agent", nil, v...); h.Code != 3 || !strings.Contains(h.Stderr, code) || h.Stdout != "" {
				t.Fatalf("%v (text) on a tampered ledger: exit %d, stdout %q, stderr %q", v, h.Code, h.Stdout, h.Stderr)
			}
		}
	}
	refused("FORK-DETECTED")
	for _, record := range []string{"verified", "appended"} { // a clone that never verified or wrote
		if err := os.Remove(filepath.Join(gitDir(t, dir), "tally", record)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	refused("HASH-MISMATCH")
}
