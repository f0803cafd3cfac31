package ledger_test

import (
	"strings"
	"testing"

	"github.com/tally-dev/tally/errs"
)

// TestNoteTextFsckClean: note text reaches the commit message through its
// summary, and git fsck --strict rejects a commit with a NUL byte
// (nulInCommit), so a note containing NUL — in its first line or later — is
// refused (USAGE, nothing written), while other control characters, which
// git accepts in a commit, are stored as given and the repository stays
// fsck-clean.
func TestNoteTextFsckClean(t *testing.T) {
	t.Parallel()
	dir, _ := buildRepo(t, 2)
	l := openLedger(t, dir)
	before := tip(t, dir)
	for _, text := range []string{"a\x00b", "first line\nthen \x00"} {
		_, err := l.Append("agent", noteDraft(text))
		if errs.CodeOf(err) != "USAGE" || !strings.Contains(err.Error(), "NUL") {
			t.Fatalf("note %q: %v, want USAGE naming NUL", text, err)
		}
		if got := tip(t, dir); got != before {
			t.Fatalf("the refused note %q moved the ledger", text)
		}
	}
	if _, err := l.Append("agent", noteDraft("tab\there, escape \x1b[31m, bell \x07, del \x7f, cr \r")); err != nil {
		t.Fatal(err)
	}
	if out, err := gitTry(dir, nil, "fsck", "--strict", "--no-dangling"); err != nil || strings.Contains(out, "warning") {
		t.Fatalf("git fsck --strict: %v\n%s", err, out)
	}
	verifyOK(t, dir, true)
}
