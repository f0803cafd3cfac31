package gitstore

import (
	"errors"
	"math/rand/v2"
	"strings"
	"time"
)

// A server at its connection limit drops a new connection rather than
// refuse it: git daemon past --max-connections (32 by default) closes it
// unanswered, sshd past MaxStartups resets it before the key exchange, and
// a web server answers 503 (or 429). Nothing of the request was read, so
// a read (a fetch, a ref listing) or a request push dropped that early is
// sent again, after a pause that doubles (with jitter, so the dropped
// clients do not come back together), within connectRetryBudget. A server
// that cannot be reached at all (connection refused, host not found)
// fails at once, REMOTE-UNREACHABLE.

// connectRetryBudget bounds how long a command waits out a server's
// connection limit before it reports the remote unreachable.
const connectRetryBudget = 30 * time.Second

// droppedWords are what git, ssh and curl say of a connection a server
// dropped before it answered.
var droppedWords = []string{
	"the remote end hung up unexpectedly", // git daemon: closed before the advertisement
	"Connection reset by peer",
	"kex_exchange_identification",           // sshd past MaxStartups
	"Connection closed by remote host",      // ssh
	"The requested URL returned error: 503", // a web server's limit
	"The requested URL returned error: 429",
}

// droppedEarly reports whether a failed read from a remote (git's error
// from a fetch or ls-remote) is a connection the server dropped, which
// may be sent again: what git said names a dropped connection, and
// nothing of a denial, a missing repository or a server not there
// (unreachableCauses).
func droppedEarly(err error) bool {
	var ge *GitError
	if !errors.As(err, &ge) || errors.Is(remoteFailure(err, ""), ErrRemoteDenied) {
		return false
	}
	for _, c := range unreachableCauses {
		for _, w := range c.words {
			if strings.Contains(ge.Stderr, w) {
				return false // not there at all: no use asking again
			}
		}
	}
	for _, w := range droppedWords {
		if strings.Contains(ge.Stderr, w) {
			return true
		}
	}
	return false
}

// unsentPush reports whether a failed `git push` failed before anything
// of it reached git on the server, so that it may be made again whatever
// it was: ssh says kex_exchange_identification only when the server closed
// the connection before the key exchange (sshd past MaxStartups), before
// any command ran. Other drops (git daemon hanging up, a 503) cannot be
// told apart from a push the server received and then dropped, so a push
// failing so is left to its caller, who lists the remote ref to learn its
// outcome.
func unsentPush(err error) bool {
	var ge *GitError
	return errors.As(err, &ge) && strings.Contains(ge.Stderr, "kex_exchange_identification")
}

// errDropped is a native request push whose connection the server closed
// before it advertised anything: nothing was sent.
var errDropped = errors.New("the server closed the connection before answering")

// retryDropped runs try until it succeeds, fails otherwise than as
// dropped says, or until budget has passed (its last error then), pausing
// between tries from 50 ms, doubling up to 2 s, each pause drawn from half
// to all of that.
func retryDropped(budget time.Duration, dropped func(error) bool, try func() error) error {
	end := time.Now().Add(budget)
	pause := 50 * time.Millisecond
	for {
		err := try()
		if err == nil || !dropped(err) {
			return err
		}
		wait := pause/2 + rand.N(pause/2+1)
		if time.Now().Add(wait).After(end) {
			return err
		}
		time.Sleep(wait)
		pause = min(2*pause, 2*time.Second)
	}
}
