package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/creack/pty"

	"github.com/tally-dev/tally"
	"github.com/tally-dev/tally/internal/testrepo"
)

// terminalRun is the outcome of tally run with some streams on a real
// pseudo-terminal: term is what the terminal received, stdout and stderr what
// went to pipes.
type terminalRun struct {
	term, stdout, stderr string
	code                 int
}

// onTerminal runs tally in dir with stdout and/or stderr on a new
// pseudo-terminal (the others piped), with env added to the test environment.
func onTerminal(t *testing.T, dir string, stdoutTTY, stderrTTY bool, env []string, args ...string) terminalRun {
	t.Helper()
	ptm, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptm.Close()
	cmd := exec.Command(testrepo.Tally(t), append([]string{"-C", dir}, args...)...)
	cmd.Env = testrepo.Env(append([]string{"TALLY_ACTOR=alice", "TERM=xterm-256color", "NO_COLOR="}, env...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if stdoutTTY {
		cmd.Stdout = tty
	}
	if stderrTTY {
		cmd.Stderr = tty
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close() // the child holds the terminal now: reading ends when it exits
	var term bytes.Buffer
	read := make(chan error, 1)
	go func() { _, err := io.Copy(&term, ptm); read <- err }()
	werr := cmd.Wait()
	// Linux reports the end of a terminal whose last holder closed it as EIO.
	if err := <-read; err != nil && !errors.Is(err, syscall.EIO) {
		t.Fatal(err)
	}
	res := terminalRun{term: term.String(), stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	if errors.As(werr, &ee) {
		res.code = ee.ExitCode()
	} else if werr != nil {
		t.Fatal(werr)
	}
	return res
}

// bigLedger makes a ledger of n notes after genesis, appended in this process
// (a tally process per entry would take minutes).
func bigLedger(t *testing.T, n int) *repo {
	t.Helper()
	r := newRepo(t)
	r.ok("alice", "init")
	c, err := tally.Open(r.dir, tally.Options{Actor: "alice", Local: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range n {
		if _, err := c.Note("note " + strings.Repeat("x", i%7)); err != nil {
			t.Fatal(err)
		}
	}
	c.L.WaitMaintenance()
	return r
}

// progressLine matches a bar drawn by the progress library for step what
// counting unit: how far (count of total), rate and elapsed:left time.
func progressLine(what, unit string) *regexp.Regexp {
	return regexp.MustCompile(what + `\s+\d+% \|[^|]*\| \(\d+/(\d+), \d+ ` + unit + `/s\) \[[0-9hms.]+:[0-9hms.]+\]`)
}

func TestProgressOnTerminal(t *testing.T) {
	const notes = 300
	r := bigLedger(t, notes)
	out := filepath.Join(t.TempDir(), "r.html")
	for _, args := range [][]string{{"verify", "--full"}, {"report", "--out", out}} {
		// On a terminal: the bar, naming the whole ledger (genesis and the notes).
		res := onTerminal(t, r.dir, false, true, nil, args...)
		if res.code != 0 {
			t.Fatalf("tally %v: exit %d\n%s%s", args, res.code, res.stdout, res.term)
		}
		m := progressLine("verify", "entries").FindStringSubmatch(res.term)
		if m == nil || m[1] != strconv.Itoa(notes+1) {
			t.Fatalf("tally %v on a terminal: no progress of %d entries on stderr: %q", args, notes+1, res.term)
		}
		// The bar clears itself: after the last one drawn, spaces over it
		// between carriage returns.
		if tail := res.term[strings.LastIndex(res.term, "]")+1:]; strings.Trim(tail, " \r") != "" ||
			!strings.HasPrefix(tail, "\r ") || !strings.HasSuffix(tail, " \r") {
			t.Errorf("tally %v: the bar is not cleared at the end: %q", args, tail)
		}
		// --json, --quiet: stderr on the terminal stays silent.
		for _, flag := range []string{"--json", "--quiet"} {
			res := onTerminal(t, r.dir, false, true, nil, append(args, flag)...)
			if res.code != 0 || res.term != "" {
				t.Errorf("tally %v %s: exit %d, the terminal got %q", args, flag, res.code, res.term)
			}
		}
		// Piped stderr (stdout on the terminal): nothing on stderr.
		res = onTerminal(t, r.dir, true, false, nil, args...)
		if res.code != 0 || res.stderr != "" {
			t.Errorf("tally %v with stderr piped: exit %d, stderr %q", args, res.code, res.stderr)
		}
	}
}

// A plan of many cells spends its time writing the state's objects: that
// write shows its own progress (and an ordinary append shows none).
func TestPlanProgressOnTerminal(t *testing.T) {
	r := newRepo(t)
	r.ok("alice", "init")
	var plan strings.Builder
	plan.WriteString(`{"wave":"big","cells":[`)
	for i := range 5000 {
		if i > 0 {
			plan.WriteString(",")
		}
		fmt.Fprintf(&plan, `{"id":"c%d"}`, i)
	}
	plan.WriteString("]}")
	res := onTerminal(t, r.dir, false, true, nil, "plan", r.file("plan.json", plan.String()))
	if res.code != 0 || progressLine("write", "objects").FindString(res.term) == "" {
		t.Fatalf("plan of 5000 cells on a terminal: exit %d, no write progress on stderr: %q%s", res.code, res.term, res.stdout)
	}
	res = onTerminal(t, r.dir, false, true, nil, "note", "small")
	if res.code != 0 || res.term != "" {
		t.Errorf("note on a terminal: exit %d, stderr %q", res.code, res.term)
	}
}

// hostile is note text made of terminal control sequences: an OSC that
// retitles the window (ended by BEL), a clear screen, a line break that would
// forge the next line, and a bidi override.
const hostile = "hi \x1b]0;pwned\x07 \x1b[2J \u202eevil bye"

func TestHumanOutputColourAndInertText(t *testing.T) {
	r := newRepo(t)
	r.ok("alice", "init")
	r.ok("alice", "note", hostile)
	inertNote := `hi \x1b]0;pwned\x07 \x1b[2J \u202eevil bye`
	sgr := regexp.MustCompile(`\x1b\[[0-9;]*m`)

	check := func(name, out string, colour bool) {
		t.Helper()
		if !strings.Contains(out, inertNote) {
			t.Errorf("%s: the note is not shown as escapes %q: %q", name, inertNote, out)
		}
		rest := sgr.ReplaceAllString(out, "")
		if strings.ContainsAny(rest, "\x1b\x07\u202e") {
			t.Errorf("%s: control characters other than colour reach the terminal: %q", name, out)
		}
		if got := sgr.MatchString(out); got != colour {
			t.Errorf("%s: colour %v, want %v: %q", name, got, colour, out)
		}
	}
	res := onTerminal(t, r.dir, true, false, nil, "log")
	check("log on a terminal", res.term, true)
	res = onTerminal(t, r.dir, true, false, []string{"NO_COLOR=1"}, "log")
	check("log on a terminal with NO_COLOR=1", res.term, false)
	res = onTerminal(t, r.dir, true, false, []string{"TERM=dumb"}, "log")
	check("log on a TERM=dumb terminal", res.term, false)
	res = onTerminal(t, r.dir, false, false, nil, "log")
	check("log piped", res.stdout, false)

	// JSON keeps the text exactly.
	res = onTerminal(t, r.dir, true, false, nil, "log", "--json")
	var got struct {
		Entries []struct {
			Kind    string `json:"kind"`
			Summary string `json:"summary"`
		} `json:"entries"`
	}
	if err := json.Unmarshal([]byte(res.term), &got); err != nil {
		t.Fatalf("log --json on a terminal: %v: %q", err, res.term)
	}
	if len(got.Entries) == 0 || got.Entries[0].Summary != "note: "+hostile {
		t.Errorf("log --json: the note's summary is not the exact text %q: %+v", "note: "+hostile, got.Entries)
	}
}

// The escapes are written out here as FORMAT.md §13 gives them.
func TestEscapeControls(t *testing.T) {
	for _, c := range []struct{ in, keep, want string }{
		{"plain text, ünïcode and a \\ backslash", "", "plain text, ünïcode and a \\ backslash"},
		{"a\nb\tc", "\n\t", "a\nb\tc"},
		{"a\nb\tc", "", `a\x0ab\x09c`},
		{"\x00\x1b[2J\x7f", "\n\t", `\x00\x1b[2J\x7f`},
		{"c1 \u009b31m and \u0085", "", `c1 \u009b31m and \u0085`},
		{"bidi \u202eevil\u202c \u2066x\u2069 \u200f", "", `bidi \u202eevil\u202c \u2066x\u2069 \u200f`},
		{"bad \xff\xc3 utf-8", "", `bad \xff\xc3 utf-8`},
	} {
		if got := escapeControls(c.in, c.keep); got != c.want {
			t.Errorf("escapeControls(%q, %q) = %q, want %q", c.in, c.keep, got, c.want)
		}
	}
}
