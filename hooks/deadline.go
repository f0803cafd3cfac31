package hooks

import (
	"fmt"
	"time"

	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
)

// The server hook's time bound. The lease rules bound what one entry costs
// (lease/limits.go), but a push may carry many entries and many commits, and
// a server has other pushers to serve: past the bound the whole push is
// refused with HOOK-TIMEOUT, which is retryable. Refusing is always safe
// because the hook only reads; receive-pack then moves no ref.
const (
	// TimeoutConfig is the git configuration variable, read in the server's
	// repository, that sets the bound.
	TimeoutConfig = "tally.hookTimeout"
	// DefaultTimeout is the bound when TimeoutConfig is not set.
	DefaultTimeout = 60 * time.Second
)

// Timeout returns the server hook's time bound configured in repo: a Go
// duration ("90s", "1m30s", "500ms") or a whole number of seconds; 0 turns
// the bound off. A value that is neither is USAGE, so that a typo fails
// closed (every push refused, saying why) rather than unbounded.
func Timeout(repo *gitstore.Repo) (time.Duration, error) {
	d, err := repo.ConfigDuration(TimeoutConfig, DefaultTimeout)
	if err != nil {
		return 0, errs.New(errs.Usage, "%v (0: no bound)", err)
	}
	return d, nil
}

// CheckWithin is Check bounded in time: if the check has not returned by
// start+d (d > 0), or returns after it, every update is refused with
// HOOK-TIMEOUT. Judging the finish as well as the timer makes the outcome
// depend only on how long the check took, not on which of the two the
// scheduler noticed first. A check cut short keeps running on its goroutine
// until the process exits, which the hook does next.
func (c *Checker) CheckWithin(updates []Update, start time.Time, d time.Duration) ([]Finding, error) {
	if d <= 0 {
		return c.Check(updates)
	}
	type result struct {
		findings []Finding
		err      error
	}
	done := make(chan result, 1)
	go func() {
		f, err := c.Check(updates)
		done <- result{f, err}
	}()
	timer := time.NewTimer(time.Until(start.Add(d)))
	defer timer.Stop()
	select {
	case r := <-done:
		if time.Since(start) <= d {
			return r.findings, r.err
		}
	case <-timer.C:
	}
	out := make([]Finding, len(updates))
	for i, u := range updates {
		out[i] = Finding{Ref: u.Ref, Code: errs.HookTimeout, Message: fmt.Sprintf(
			"the server's check of this push took longer than %v (git config %s); nothing was changed, push again later",
			d, TimeoutConfig)}
	}
	return out, nil
}
