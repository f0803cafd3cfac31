package gitstore

import (
	"bufio"
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/format/pktline"
)

// TestNativeReportFailureAsGit: when the server's report stream breaks off,
// the native push judges the failure on what git would have printed — the
// server's side-band lines and git's own "fatal:" line — so the server's
// words decide the class as they do for `git push` (a gitolite denial
// printed before the cut is a denial, not a retryable cut) and stay in the
// message.
func TestNativeReportFailureAsGit(t *testing.T) {
	for _, tc := range []struct {
		name   string
		bands  [][]byte // side-band packets, then the stream ends without a flush
		class  error
		git    string // git's stderr for the same stream
		inText string
	}{
		{"denied, then cut", [][]byte{append([]byte{2}, "FATAL: W any srv u DENIED by fallthru\n"...)},
			ErrRemoteDenied, "remote: FATAL: W any srv u DENIED by fallthru\nfatal: the remote end hung up unexpectedly\n", "DENIED by fallthru"},
		{"said, then cut", [][]byte{append([]byte{2}, "tally: sequencing\r"...), append([]byte{2}, "half\n"...)},
			ErrRemoteUnreachable, "remote: tally: sequencing\rremote: half\nfatal: the remote end hung up unexpectedly\n", "tally: sequencing; half"},
		{"fatal band", [][]byte{append([]byte{3}, "Permission denied (publickey).\n"...)},
			ErrRemoteDenied, "remote: Permission denied (publickey).\nfatal: the remote end hung up unexpectedly\n", "Permission denied (publickey)"},
	} {
		var stream bytes.Buffer
		enc := pktline.NewEncoder(&stream)
		for _, b := range tc.bands {
			if err := enc.Encode(b); err != nil {
				t.Fatal(err)
			}
		}
		_, err := readReport(pktline.NewScanner(bufio.NewReader(&stream)), "refs/for/tally/x", ObjectID{})
		want := remoteFailure(&GitError{Args: []string{"push"}, Code: 128, Stderr: tc.git, Err: errors.New("exit status 128")}, "")
		if !errors.Is(err, tc.class) || !errors.Is(want, tc.class) {
			t.Fatalf("%s: native %v, git's words %v; want both %v", tc.name, err, want, tc.class)
		}
		if !strings.Contains(err.Error(), tc.inText) || !strings.Contains(want.Error(), tc.inText) {
			t.Fatalf("%s: native %q, git's words %q; want both to hold %q", tc.name, err, want, tc.inText)
		}
	}
}
