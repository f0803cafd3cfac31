package main

import (
	"bytes"
	"errors"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/tally-dev/tally/internal/testrepo"
)

// TestGuardAttackHugePayload: 100 MiB on stdin is refused after reading a
// bounded prefix of it, in bounded memory (the peak resident size Linux
// reports for the process), not read whole.
func TestGuardAttackHugePayload(t *testing.T) {
	r := guardRepo(t)
	head := strings.TrimSuffix(claudeWrite(r.dir, "README", ""), `x"}}`) // ends in "content":"
	payload := io.MultiReader(strings.NewReader(head), io.LimitReader(zeroes{}, 100<<20), strings.NewReader(`"}}`))
	cmd := exec.Command(testrepo.Tally(t), "guard", "--agent", "claude")
	cmd.Dir = t.TempDir()
	cmd.Env = testrepo.Env(append(r.env(), "TALLY_ACTOR=alice")...)
	cmd.Stdin = payload
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	var ee *exec.ExitError
	if err := cmd.Run(); !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(stderr.String(), "LIMIT-EXCEEDED") {
		t.Fatalf("100 MiB payload: %v %q", err, stderr.String())
	}
	const maxRSS = 64 << 20
	if rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10; rss > maxRSS {
		t.Errorf("refusing a 100 MiB payload took %d MiB resident, over %d MiB", rss>>20, maxRSS>>20)
	}
}

// zeroes reads as an endless run of '0' characters (string content).
type zeroes struct{}

func (zeroes) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = '0'
	}
	return len(p), nil
}
