package main

// The flags of the commands that run CMD while holding something. They
// build on every platform, though the commands run only on Unix
// (runner_other.go): 'pool' tells 'pool acquire' from its other
// subcommands by skipping these flags (runnerFlagSet), everywhere.

import (
	"time"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/session"
)

const defaultTTL = 10 * time.Second

// runFlags are the flags of lock, sem and elect.
type runFlags struct {
	ttl       time.Duration
	wait      optDuration
	killAfter optDuration
	lockDelay optDuration // lock and elect only
	grace     optDuration
}

func (f *runFlags) register(c *command, lockDelay bool) {
	c.fs.DurationVar(&f.ttl, "ttl", defaultTTL, "lease `TTL`: how long the hold outlives a silent leasehold on the server")
	f.wait.def = "forever"
	c.fs.Var(&f.wait, "wait", "give up after waiting this `duration` (exit 73); 0: try once, exit 73 at once if not granted")
	f.grace.def = "max(TTL, 10s)"
	c.fs.Var(&f.grace, "restart-grace", "once the namespace's data is found missing (Redis lost it, or the namespace is new), refuse grants this `duration`; at least the TTL, and no shorter than the namespace's (its sessions' RestartGrace)")
	f.killAfter.def = "TTL/3"
	c.fs.Var(&f.killAfter, "kill-after", "after a loss, send SIGKILL this `duration` after SIGTERM; at most the TTL")
	if lockDelay {
		f.lockDelay.def = "kill-after + TTL/10"
		c.fs.Var(&f.lockDelay, "lock-delay", "after a loss, keep the resource from others this `duration` beyond the lease's expiry")
	}
}

// options validates the flags and returns the session options.
func (f *runFlags) options(c *command, g *globals) (session.Options, time.Duration, error) {
	if err := g.check(); err != nil {
		return session.Options{}, 0, err
	}
	if f.ttl < 50*time.Millisecond {
		return session.Options{}, 0, c.usageErr("--ttl %v: at least 50ms", f.ttl)
	}
	kill := f.killAfter.or(f.ttl / 3)
	if kill > f.ttl {
		return session.Options{}, 0, c.usageErr("--kill-after %v exceeds --ttl %v: a CMD ignoring SIGTERM could outlive the lease by that much", kill, f.ttl)
	}
	o := session.Options{Namespace: g.namespace, TTL: f.ttl, RestartGrace: f.grace.or(0)}
	if f.lockDelay.def != "" {
		o.LockDelay = f.lockDelay.or(min(kill+f.ttl/10, session.MaxDuration))
	}
	// The session's own rules (a restart grace no shorter than the TTL,
	// upper bounds, ...), from their one home: flags they refuse are a
	// usage error, not a failed connection. (--ttl is checked above: 0
	// there would be Options' default, 10s.)
	if _, err := lease.Options(o).WithDefaults(); err != nil {
		return session.Options{}, 0, c.usageErr("%v", err)
	}
	return o, kill, nil
}
