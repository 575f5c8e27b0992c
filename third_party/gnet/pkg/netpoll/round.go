// leasecached patch: a hook at the end of each round of events, for batched reads. See LEASECACHED.md,
// item 4.

//go:build (darwin || dragonfly || freebsd || linux || netbsd || openbsd) && !poll_opt

package netpoll

// OnRoundDone makes Polling call f after the callbacks of each round of events, before the queued tasks.
// f returns nil, or errorx.ErrEngineShutdown to end Polling (any error it returns ends Polling). It must be
// called before Polling starts.
func (p *Poller) OnRoundDone(f func() error) { p.roundDone = f }

// endRound runs the OnRoundDone function, if any (hook: called by Polling after each round's callbacks).
func (p *Poller) endRound() error {
	if p.roundDone == nil {
		return nil
	}
	return p.roundDone()
}
