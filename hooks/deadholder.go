package hooks

import (
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/ledger"
)

// refuseDeadHolder refuses, on the server, an entry that takes over a live
// lease as a dead-holder takeover. Its only ground is the taker's evidence
// that the holder's process is gone, and only a process in the holder's own
// process table (host, boot, PID namespace) could observe that: not the
// server, and not anyone else sharing the remote. The rules accept such an
// entry when the evidence matches the recorded identity, which the taker
// writes itself, so at the server the takeover is refused whatever the
// evidence says. Takeovers the server can judge from entry time alone
// (expiry, max-hold steal) pass, and so does a reclaim-dead claim that
// turned out to be one of those.
func refuseDeadHolder(a *ledger.Applied) error {
	g, ok := a.Result.Effect.(*lease.Granted)
	if !ok || g.Takeover != lease.TakeoverDeadHolder {
		return nil
	}
	return errs.New(errs.DeadHolderRemote, "entry %d takes over %s's live lease (epoch %d) on its own word that the holder's process is gone; "+
		"the server cannot check that: a live lease ends here only by expiry or max-hold steal", a.Entry.Seq, g.Prior.Actor, g.Prior.Epoch).
		With("seq", a.Entry.Seq).With("holder", g.Prior.Actor).With("epoch", g.Prior.Epoch)
}
