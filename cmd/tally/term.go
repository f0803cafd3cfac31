package main

// What tally does differently on a terminal: progress bars on stderr, colour
// on stdout, and, always, entry text made inert in human output.
//
// Progress uses github.com/schollz/progressbar/v3: it draws what, how far,
// the rate and the time left in one self-clearing line, throttles its own
// redraws, has no dependencies beyond golang.org/x/term and two small
// string libraries, and is kept up (v3.19, 2025). cheggaaa/pb/v3, the other
// common choice, needs a template language and more dependencies for the
// same line. Terminal detection is golang.org/x/term, already in the build
// through golang.org/x/crypto.

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/schollz/progressbar/v3"
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
	if a.bar == nil || what != a.barWhat || done < a.barDone {
		a.endProgress()
		unit := progressUnits[what]
		a.bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(a.stderr),
			progressbar.OptionSetDescription(what),
			progressbar.OptionSetItsString(unit),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionSetWidth(24),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish())
		a.barWhat = what
	}
	a.barDone = done
	a.bar.Set(done)
}

// endProgress clears a bar left unfinished (the step failed, or was cut
// short), so that an error message starts on a clean line.
func (a *app) endProgress() {
	if a.bar != nil && !a.bar.IsFinished() {
		a.bar.Clear()
	}
	a.bar, a.barWhat, a.barDone = nil, "", 0
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
