package main

import (
	"bufio"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/internal/gitserver"
	"github.com/tally-dev/tally/internal/testrepo"
)

// rangeFilterEnv, set, makes this test binary a filter of a sequencer's
// sent range (filterRange) instead of running tests: the wrapper
// rangeFilterSequencer writes runs it on what the real hook said.
const rangeFilterEnv = "TALLY_TEST_RANGE_FILTER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(rangeFilterEnv); mode != "" {
		if err := filterRange(mode, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stdout, "range filter:", err) // reaches the client as a remote: line
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// filterRange copies the sequencer's standard error from in to out with
// its form 3 range changed by mode, on the last delta line whose base is
// an object of the range before it (the newest entry's cells tree, when
// the range holds two claims): "dbase" names a base nobody has, "dorder"
// moves the line up to right after the header (before its base), "dsrc"
// and "dsize" make the delta's base size or result size one more than the
// truth, "dcopy" adds a copy that runs out of the base, "dhuge" declares a
// result of 1 GiB, "dflip" inserts one byte more (a valid delta of an
// object nobody needs), "dcut" cuts the line's last four characters, and
// "dform" calls the range form 2. "pass" changes nothing.
func filterRange(mode string, in io.Reader, out io.Writer) error {
	b, err := io.ReadAll(in)
	if err != nil {
		return err
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	w := bufio.NewWriter(out)
	defer w.Flush()
	if mode != "pass" {
		if err := tamperRange(mode, lines); err != nil {
			return err
		}
	}
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
	return nil
}

// tamperRange changes lines as filterRange's mode says.
func tamperRange(mode string, lines []string) error {
	header := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "tally-range 3 ") })
	if header < 0 {
		return fmt.Errorf("no form 3 range")
	}
	if mode == "dform" {
		lines[header] = strings.Replace(lines[header], "tally-range 3 ", "tally-range 2 ", 1)
		return nil
	}
	target, err := deltaOnRange(lines[header+1:])
	if err != nil {
		return err
	}
	target += header + 1
	f := strings.Fields(lines[target])
	delta, err := base64.StdEncoding.DecodeString(f[2])
	if err != nil {
		return err
	}
	src, n1 := binary.Uvarint(delta)
	dst, n2 := binary.Uvarint(delta[n1:])
	ops := delta[n1+n2:]
	head := func(src, dst uint64) []byte { return binary.AppendUvarint(binary.AppendUvarint(nil, src), dst) }
	switch mode {
	case "dbase":
		f[1] = gitstore.HashObject(gitstore.BlobObject, []byte("nobody has this")).String()
	case "dorder":
		moved := lines[target]
		copy(lines[header+2:target+1], lines[header+1:target])
		lines[header+1] = moved
		return nil
	case "dsrc":
		delta = append(head(src+1, dst), ops...)
	case "dsize":
		delta = append(head(src, dst+1), ops...)
	case "dcopy": // copy 2 bytes from the base's last one: four offset bytes, one size byte
		delta = binary.LittleEndian.AppendUint32(append(append(head(src, dst+2), ops...), 0x9f), uint32(src-1))
		delta = append(delta, 2)
	case "dhuge":
		delta = append(head(src, 1<<30), ops...)
	case "dflip":
		delta = append(append(head(src, dst+1), ops...), 1, 'x')
	case "dcut":
		lines[target] = lines[target][:len(lines[target])-4]
		return nil
	default:
		return fmt.Errorf("unknown mode %q", mode)
	}
	f[2] = base64.StdEncoding.EncodeToString(delta)
	lines[target] = strings.Join(f, " ")
	return nil
}

// deltaOnRange is the index among lines (a range's object lines) of the
// last delta line whose base is the object of an earlier line. The bases
// the range does not hold are read from the repository the filter runs in
// (the server's: a hook runs there).
func deltaOnRange(lines []string) (int, error) {
	repo, err := gitstore.Open(".")
	if err != nil {
		return 0, err
	}
	defer repo.Close()
	db, err := repo.Objects()
	if err != nil {
		return 0, err
	}
	objs := map[gitstore.ObjectID]*gitstore.Object{}
	target := -1
	for i, l := range lines {
		f := strings.Fields(l)
		if len(f) < 2 || (f[0] != "tally-entry" && f[0] != "tally-delta") {
			continue
		}
		data, err := base64.StdEncoding.DecodeString(f[len(f)-1])
		if err != nil {
			return 0, err
		}
		var o *gitstore.Object
		if f[0] == "tally-entry" {
			o, err = gitstore.DecodeEntry(data, 1<<20)
		} else {
			base, _ := gitstore.ParseObjectID(f[1])
			b := objs[base]
			if b != nil {
				target = i
			} else if b, err = db.ReadEntry(base); err != nil {
				return 0, err
			}
			o, err = gitstore.DeltaObject(b, data, 1<<20)
		}
		if err != nil {
			return 0, err
		}
		objs[o.ID()] = o
	}
	if target < 0 {
		return 0, fmt.Errorf("no delta line on a base in the range")
	}
	return target, nil
}

// rangeFilterSequencer wraps the bare repository's sequencer so that, while
// the file mode (its path returned) holds a filterRange mode, the hook's
// standard error goes through filterRange, and what the hook said is
// kept in mode.sent, what it passed on in mode.out.
func rangeFilterSequencer(t *testing.T, bare string) (mode string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	mode = filepath.Join(bare, "range-mode")
	wrapSequencer(t, bare, func(real string) string {
		return `#!/bin/sh
m=$(cat '` + mode + `' 2>/dev/null)
[ -n "$m" ] || exec '` + real + `' "$@"
err=$(mktemp) || exit 1
'` + real + `' "$@" 2>"$err"
rc=$?
cp "$err" '` + mode + `.sent'
` + rangeFilterEnv + `="$m" '` + self + `' <"$err" | tee '` + mode + `.out' >&2
rm -f "$err"
exit $rc
`
	})
	return mode
}

// TestSequencedDeltaRange: over git daemon (tally's own push) and smart
// HTTP (git push), a sequenced claim that receives a form 3 range — two
// entries, the other agent's claim and its own, their trees as deltas —
// takes it: no fetch, and its tracking ref and record are the server's
// tip. The same range with a delta line changed in flight (a base nobody
// has, a delta moved before its base, a base or result size that lies, a
// copy out of the base, a result of 1 GiB, another valid delta, a cut
// line, the range called form 2) is not taken: the claim fetches and still
// gets its cell, its tracking ref and record are the server's tip, no
// .keep pack is left, no cell is granted twice, and the ledger verifies.
func TestSequencedDeltaRange(t *testing.T) {
	modes := []string{"pass", "dbase", "dorder", "dsrc", "dsize", "dcopy", "dhuge", "dflip", "dcut", "dform"}
	for _, kind := range gitserver.Kinds {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			c := newNetCluster(t, kind)
			seed := c.seeded("delta", 2*len(modes)+2)
			dirs := c.agents(2)
			sequenced(t, dirs...)
			mode := rangeFilterSequencer(t, c.bare)
			told := map[string]bool{}
			claim := func(i int, m string) int {
				t.Helper()
				must(t, os.WriteFile(mode, []byte(m), 0o644))
				p, fetches := gitFetches(t, c.bin, dirs[i], netAgent(i), "--remote", "origin", "claim", "--next", "--ttl", "3600")
				if p.Err != nil || p.Code != 0 {
					t.Fatalf("%s, %s: %s %v", netAgent(i), m, p, p.Err)
				}
				key := fmt.Sprintf("%v/%v", p.JSON["wave"], p.JSON["cell"])
				if told[key] {
					t.Fatalf("%s: %s granted twice", m, key)
				}
				told[key] = true
				return fetches
			}
			claim(0, "")
			claim(1, "")
			for _, m := range modes {
				if n := claim(1, ""); n != 0 {
					t.Fatalf("%s: agent 1 fetched %d times", m, n)
				}
				if n := claim(0, m); (n > 0) != (m != "pass") {
					t.Fatalf("%s: %d fetches, want a fetch %v", m, n, m != "pass")
				}
				sent, err := os.ReadFile(mode + ".sent")
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(string(sent), "tally-range 3 ") || !strings.Contains(string(sent), "\ntally-delta ") {
					t.Fatalf("%s: the sequencer sent no form 3 range with deltas:\n%s", m, sent)
				}
				// The filter did what the mode says, and nothing else.
				out, err := os.ReadFile(mode + ".out")
				if err != nil || strings.Contains(string(out), "range filter: ") || (string(out) == string(sent)) != (m == "pass") {
					t.Fatalf("%s: the filter passed on %d bytes of the %d sent (%v):\n%s", m, len(out), len(sent), err, out)
				}
				tip := c.serverTip()
				if got := testrepo.Git(t, dirs[0], "rev-parse", "refs/remotes/origin/tally/ledger"); got != tip {
					t.Fatalf("%s: tracking ref at %s, the server's tip is %s", m, got, tip)
				}
				if rec, err := os.ReadFile(filepath.Join(dirs[0], ".git", "tally", "remotes", "origin.json")); err != nil || !strings.Contains(string(rec), tip) {
					t.Fatalf("%s: the record of the remote does not name the server's tip %s: %s %v", m, tip, rec, err)
				}
				if keeps, _ := filepath.Glob(filepath.Join(dirs[0], ".git", "objects", "pack", "*.keep")); len(keeps) > 0 {
					t.Fatalf("%s: packs left kept: %v", m, keeps)
				}
			}
			for cell, who := range netClaims(t, c.bare) {
				if len(who) > 1 {
					t.Fatalf("%s claimed by %v in the server's ledger", cell, who)
				}
			}
			c.ok(dirs[0], netAgent(0), nil, "--remote", "origin", "verify", "--full")
			c.ok(seed, "auditor", nil, "--remote", "origin", "verify", "--full")
		})
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
