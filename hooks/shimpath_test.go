package hooks

import (
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// A shim names its tally binary with forward slashes (C:/... on Windows,
// which Git for Windows' sh runs as it is), quoted for sh, and reading the
// shim back gives the path in the system's own form. Run by the Windows
// test executable under wine too, where the path has a drive and
// backslashes.
func TestShimNamesTheBinaryForSh(t *testing.T) {
	path := "/opt/it's here/tally"
	if runtime.GOOS == "windows" {
		path = `C:\Program Files\it's here\tally.exe`
	}
	text := shim("pre-push", path, false)
	want := binLine + `'` + strings.ReplaceAll(filepath.ToSlash(path), `'`, `'\''`) + `'`
	if !strings.Contains(text, "\n"+want+"\n") {
		t.Fatalf("shim for %s lacks the line %s:\n%s", path, want, text)
	}
	if got := shimBinary(text); got != path {
		t.Fatalf("shim names %q, want %q", got, path)
	}
}
