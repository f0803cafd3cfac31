package main

import (
	"strings"
	"testing"

	"github.com/tally-dev/tally/internal/testrepo"
)

// TestUnknownCommands: an unknown command or subcommand is USAGE (exit 2,
// not retryable) naming it, with cobra's suggestion where one is close; a
// command group without arguments prints its help and exits 0.
func TestUnknownCommands(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args    []string
		mention string
	}{
		{[]string{"bogus"}, `unknown command "bogus" for "tally"`},
		{[]string{"polcy"}, "did you mean policy?"},
		{[]string{"policy", "bogus"}, `unknown command "bogus" for "tally policy"`},
		{[]string{"policy", "shw"}, "show"},
		{[]string{"keys", "bogus", "x"}, `"tally keys"`},
	} {
		res := testrepo.Run(t, dir, "", nil, append([]string{"--json"}, c.args...)...)
		msg, _ := obj(t, res.JSON, "error")["message"].(string)
		if res.Code != 2 || res.ErrorCode() != "USAGE" || !strings.Contains(msg, c.mention) {
			t.Errorf("tally %v: exit %d %s, want USAGE mentioning %q", c.args, res.Code, res.Stdout, c.mention)
		}
	}
	if res := testrepo.Run(t, dir, "", nil, "policy"); res.Code != 0 || !strings.Contains(res.Stdout, "Available Commands") {
		t.Errorf("tally policy: exit %d %q, want its help", res.Code, res.Stdout)
	}
}
