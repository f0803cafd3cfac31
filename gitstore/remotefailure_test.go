package gitstore

import (
	"errors"
	"strings"
	"testing"
)

// TestRemoteFailureWords: the classifier's text rules, for the servers the
// integration tests cannot start here: gitolite refusing a read over ssh,
// ssh refusing the key, and git's HTTP transport, as git prints them on
// stderr. tally's own hook verdicts that contain "DENIED" or "permission
// denied" stay rejections, a refused connection stays transient, and an HTML
// page is reduced to its words.
func TestRemoteFailureWords(t *testing.T) {
	for _, c := range []struct {
		stderr, status string
		want           error
		words          string
	}{
		{"FATAL: R any project bob DENIED by fallthru\n(or you mis-spelled the reponame)\nfatal: Could not read from remote repository.\n", "", ErrRemoteDenied, "DENIED by fallthru"},
		{"git@host: Permission denied (publickey).\nfatal: Could not read from remote repository.\n", "", ErrRemoteDenied, "Permission denied (publickey)"},
		{"fatal: Authentication failed for 'https://host/p.git/'\n", "", ErrRemoteDenied, "Authentication failed"},
		{"remote: tally: refused refs/tally/ledger: PUSHER-DENIED: pusher bob may not write for alice\nremote: open x: permission denied\n" +
			"error: failed to push some refs to 'git://host/p.git'\n", "[remote rejected] (pre-receive hook declined)",
			ErrPushRejected, "PUSHER-DENIED: pusher bob"},
		{"fatal: unable to connect to 127.0.0.1:\n127.0.0.1[0: 127.0.0.1]: errno=Connection refused\n", "", ErrRemoteUnreachable, "Connection refused"},
		{"remote: <html><head><title>502 Bad Gateway</title><style>h1{color:red}</style><script>var x=1</script></head><body><h1>Bad&nbsp;Gateway &amp; more</h1></body></html>\nfatal: unable to access 'http://host/p.git/': The requested URL returned error: 502\n",
			"", ErrRemoteUnreachable, "502 Bad Gateway Bad Gateway & more"},
		{"remote: <!DOCTYPE html><!-- a <b>comment</b> --><P>quota: 3 < 5 &lt;= 7</P><SCRIPT type=x>if (a<b) {}</SCRIPT>\nfatal: unable to access 'http://host/p.git/': The requested URL returned error: 503\n",
			"", ErrRemoteUnreachable, "quota: 3 < 5 <= 7"},
	} {
		got := remoteFailure(&GitError{Args: []string{"push"}, Code: 128, Stderr: c.stderr, Err: errors.New("exit status 128")}, c.status)
		if !errors.Is(got, c.want) || !strings.Contains(got.Error(), c.words) {
			t.Errorf("remoteFailure(%q) = %v, want %v carrying %q", c.stderr, got, c.want, c.words)
		}
		if msg := strings.ReplaceAll(got.Error(), c.words, ""); strings.ContainsAny(msg, "<>{}") || strings.Contains(msg, "comment") {
			t.Errorf("remoteFailure(%q): markup left in %q", c.stderr, got)
		}
	}
}
