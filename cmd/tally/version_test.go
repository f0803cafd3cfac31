package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/tally-dev/tally/internal/testrepo"
)

// TestVersion: `tally --version` and `tally version` report the module
// version that `go version -m` reads from the binary itself.
func TestVersion(t *testing.T) {
	want := moduleVersion(t, testrepo.Tally(t))
	dir := t.TempDir()
	flag := testrepo.Run(t, dir, "", nil, "--version")
	if flag.Code != 0 || !strings.HasPrefix(flag.Stdout, "tally "+want) {
		t.Fatalf("tally --version: exit %d %q, want tally %s", flag.Code, flag.Stdout, want)
	}
	js := testrepo.Run(t, dir, "", nil, "--json", "version")
	if js.Code != 0 || js.JSON["ok"] != true || js.JSON["version"] != want || !strings.HasPrefix(js.JSON["go"].(string), "go1.") {
		t.Fatalf("tally --json version: %v", js.JSON)
	}
}

// moduleVersion is the main module's version that `go version -m` reads
// from the binary.
func moduleVersion(t *testing.T, bin string) string {
	t.Helper()
	out, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "mod" && f[1] == "github.com/tally-dev/tally" {
			return f[2]
		}
	}
	t.Fatalf("go version -m names no main module:\n%s", out)
	return ""
}
