package main

// What tally does differently on a terminal: progress bars on stderr, colour
// on stdout, and, always, entry text made inert in human output.
//
// Progress is one self-clearing line drawn here (progressBar): what, how
// far, the rate and the time elapsed and left, redrawn at most every 100 ms.
// github.com/schollz/progressbar/v3 drew the same line, but its package
// initializers (spinner tables, colour codes, and net/http for a web view)
// ran in every tally process, progress shown or not: 3% of a `tally note`.
// Terminal detection is golang.org/x/term, already in the build through
// golang.org/x/crypto.

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/term"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/ledger"
)

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// colorAllowed reports whether the environment lets tally colour a terminal:
// not when NO_COLOR is set to anything but "" (no-color.org), nor on
// TERM=dumb.
func colorAllowed() bool {
	return os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb"
}

// progress returns the ledger's progress callback for this invocation: nil
// (nothing shown) with --json, with --quiet, or when stderr is not a
// terminal.
func (a *app) progress() ledger.Progress {
	if a.jsonOut || a.quiet || !isTerminal(a.stderr) {
		return nil
	}
	return a.showProgress
}

// progressUnits names what each ledger step counts.
var progressUnits = map[string]string{"verify": "entries", "rebuild": "entries", "write": "objects", "gc": "packs"}

// showProgress draws one step's bar; a new step (another what, or a count
// that starts again) replaces the bar. A bar clears itself when done reaches
// total, so finished work leaves nothing on the terminal.
func (a *app) showProgress(what string, done, total int) {
	if a.bar == nil || what != a.bar.what || done < a.bar.done {
		a.endProgress()
		a.bar = &progressBar{w: a.stderr, what: what, unit: progressUnits[what], total: total, start: time.Now()}
	}
	a.bar.set(done)
}

// endProgress clears a bar left unfinished (the step failed, or was cut
// short), so that an error message starts on a clean line.
func (a *app) endProgress() {
	if a.bar != nil && a.bar.done < a.bar.total {
		a.bar.clear()
	}
	a.bar = nil
}

// progressBarWidth is the bar's width in cells, and progressRedraw the least
// time between two drawings but the last.
const (
	progressBarWidth = 24
	progressRedraw   = 100 * time.Millisecond
)

// progressBar is one step's line on a terminal, for example
// "verify  42% |██████████              | (126/301, 240 entries/s) [0s:1s]":
// percent, bar, count of total, rate since the start, elapsed and left
// (extrapolated from the rate). Drawn in place (carriage return), at most
// every progressRedraw and always when done reaches total, which clears it.
type progressBar struct {
	w           io.Writer
	what, unit  string
	done, total int
	start, last time.Time
	drawn       int // the length in cells of the line on the terminal, 0 if none
}

func (b *progressBar) set(done int) {
	finished := b.done >= b.total && !b.last.IsZero()
	b.done = done
	now := time.Now()
	if finished || done < b.total && b.drawn > 0 && now.Sub(b.last) < progressRedraw {
		return
	}
	b.last = now
	elapsed := now.Sub(b.start)
	rate, left := 0.0, time.Duration(0)
	if s := elapsed.Seconds(); s > 0 {
		rate = float64(done) / s
	}
	if done > 0 {
		left = time.Duration(float64(elapsed) * float64(b.total-done) / float64(done))
	}
	fill := progressBarWidth
	pct := 100
	if b.total > 0 {
		fill, pct = min(fill, progressBarWidth*done/b.total), min(pct, 100*done/b.total)
	}
	line := fmt.Sprintf("%s %3d%% |%s%s| (%d/%d, %d %s/s) [%s:%s]", b.what, pct,
		strings.Repeat("█", fill), strings.Repeat(" ", progressBarWidth-fill), done, b.total, int(rate), b.unit,
		elapsed.Round(time.Second), left.Round(time.Second))
	n := utf8.RuneCountInString(line)
	if done >= b.total {
		// the last line, cleared at once: no need to blank a longer one
		fmt.Fprint(b.w, "\r"+line)
		b.drawn = max(n, b.drawn)
		b.clear()
		return
	}
	fmt.Fprint(b.w, "\r"+line+strings.Repeat(" ", max(0, b.drawn-n)))
	b.drawn = max(n, b.drawn)
}

// clear blanks the line drawn, leaving the cursor at its start.
func (b *progressBar) clear() {
	if b.drawn > 0 {
		fmt.Fprint(b.w, "\r"+strings.Repeat(" ", b.drawn)+"\r")
		b.drawn = 0
	}
}

// gitProgressOut passes git's own push progress to the terminal, made inert
// like everything else tally shows, but for the carriage returns and line
// feeds with which git redraws its counters. What the server says comes
// through git, which starts each of its lines, after a carriage return too,
// with "remote: ", so no server text can pose as tally's or git's own.
type gitProgressOut struct{ w io.Writer }

func (g gitProgressOut) Write(p []byte) (int, error) {
	if _, err := io.WriteString(g.w, escapeControls(string(p), "\r\n")); err != nil {
		return 0, err
	}
	return len(p), nil
}

// humanOut is the writer behind every human (non-JSON) rendering. Whatever
// is written through it is made inert (escapeControls, keeping line breaks
// and tabs, which the renderings use for layout), so no ledger text can
// move the cursor, retitle the window, clear the screen or hide what
// follows. Colour is written beside it, never through it (paint). Writes are
// assumed to hold whole UTF-8 sequences, as fmt and text/tabwriter's are.
type humanOut struct {
	w     io.Writer
	color bool
}

// newHumanOut wraps w; colour only when w is a terminal the environment lets
// tally colour.
func newHumanOut(w io.Writer) *humanOut {
	return &humanOut{w: w, color: isTerminal(w) && colorAllowed()}
}

func (h *humanOut) Write(p []byte) (int, error) {
	if _, err := io.WriteString(h.w, escapeControls(string(p), "\n\t")); err != nil {
		return 0, err
	}
	return len(p), nil
}

// style is an SGR parameter string.
type style string

const (
	bold   style = "1"
	dim    style = "2"
	red    style = "31"
	green  style = "32"
	yellow style = "33"
	cyan   style = "36"
)

// paint writes the formatted text to w in style st when w is a colouring
// humanOut, plainly otherwise. The text itself still goes through w.
func paint(w io.Writer, st style, format string, args ...any) {
	h, ok := w.(*humanOut)
	if ok && h.color {
		io.WriteString(h.w, "\x1b["+string(st)+"m")
		defer io.WriteString(h.w, "\x1b[0m")
	}
	fmt.Fprintf(w, format, args...)
}

// kindStyle colours a log entry by what it does to a lease.
func kindStyle(kind chain.Kind) style {
	switch kind {
	case chain.KindClaim, chain.KindLock:
		return green
	case chain.KindDone:
		return cyan
	case chain.KindFail, chain.KindBreak, chain.KindRequeue:
		return red
	case chain.KindRelease, chain.KindUnlock, chain.KindRenew:
		return yellow
	}
	return bold
}

// inert returns ledger text (a note, a reason, an actor name) ready to print
// inside one line of human output: escapeControls with nothing kept, so a
// line break in the text cannot forge the next line either.
func inert(s string) string { return escapeControls(s, "") }

// escapeControls replaces every control character of s except those in keep
// by a Go-style escape: C0 controls and DEL as \x1b, C1 controls and the
// Unicode bidirectional overrides and isolates (which reorder what a reader
// sees) as \u009b, and bytes that are not UTF-8 as \xff. Everything else,
// the backslash included, is left as it is.
func escapeControls(s string, keep string) string {
	clean := true
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if mustEscape(r, n) && !strings.ContainsRune(keep, r) {
			clean = false
			break
		}
		i += n
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case !mustEscape(r, n) || strings.ContainsRune(keep, r):
			b.WriteString(s[i : i+n])
		case r == utf8.RuneError || r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += n
	}
	return b.String()
}

// mustEscape reports whether rune r (n bytes long in its string) is one that
// escapeControls replaces.
func mustEscape(r rune, n int) bool {
	switch {
	case r == utf8.RuneError && n == 1: // not UTF-8
		return true
	case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f):
		return true
	case (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) || r == 0x200e || r == 0x200f || r == 0x061c:
		return true
	}
	return false
}
