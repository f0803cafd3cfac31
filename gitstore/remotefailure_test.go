package gitstore

import (
	"errors"
	"strings"
	"testing"
)

// TestRemoteFailureWords: the classifier's text rules, for the servers the
// integration tests cannot start here: gitolite refusing a read over ssh
// (go-git reports its stderr as "unknown error: …"), ssh refusing the key,
// and the git CLI's HTTP transport. tally's own hook verdicts that contain
// "DENIED" or "permission denied" stay rejections, a refused connection
// stays transient, and an HTML page is reduced to its words.
func TestRemoteFailureWords(t *testing.T) {
	for _, c := range []struct {
		err, progress string
		want          error
		words         string
	}{
		{"unknown error: FATAL: R any project bob DENIED by fallthru", "", ErrRemoteDenied, "DENIED by fallthru"},
		{"unknown error: git@host: Permission denied (publickey).", "", ErrRemoteDenied, "Permission denied (publickey)"},
		{"fatal: Authentication failed for 'https://host/p.git/'", "", ErrRemoteDenied, "Authentication failed"},
		{"command error on refs/tally/ledger: pre-receive hook declined",
			"remote: tally: refused refs/tally/ledger: PUSHER-DENIED: pusher bob may not write for alice\nremote: open x: permission denied\n",
			ErrPushRejected, "PUSHER-DENIED: pusher bob"},
		{"dial tcp 127.0.0.1:9: connect: connection refused", "", ErrRemoteUnreachable, "connection refused"},
		{"unexpected status: <html><head><title>502 Bad Gateway</title><style>h1{color:red}</style><script>var x=1</script></head><body><h1>Bad&nbsp;Gateway &amp; more</h1></body></html>",
			"", ErrRemoteUnreachable, "unexpected status: 502 Bad Gateway Bad Gateway & more"},
	} {
		got := remoteFailure(errors.New(c.err), c.progress)
		if !errors.Is(got, c.want) || !strings.Contains(got.Error(), c.words) {
			t.Errorf("remoteFailure(%q, %q) = %v, want %v carrying %q", c.err, c.progress, got, c.want, c.words)
		}
		if strings.ContainsAny(got.Error(), "<>{}") {
			t.Errorf("remoteFailure(%q): markup left in %q", c.err, got)
		}
	}
}
