package election

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/leasehold/leasehold/internal/hook"
	"github.com/leasehold/leasehold/session"
)

// Observer follows the leader of an election: C receives the leader every
// time it changes, and once C is closed, Err says why the observation ended.
// Election.Observer starts one. An Observer is safe for concurrent use.
type Observer struct {
	c chan Leader // written only by the observing goroutine; closed by end

	mu  sync.Mutex
	err error // guarded by mu: nil until end sets it, right before closing c
}

// Observer starts following the election's leader. The Observer's channel
// receives the leader every time it changes, starting with the current one;
// a zero Leader means nobody leads. The channel holds one value and always
// ends with the latest: a slow reader skips intermediate states, never gets
// them out of order. A change is announced on pub/sub; after a reconnect,
// and when the leader's lease could have expired, the state is read again.
//
// The observation ends, and the channel is closed, when ctx ends, when the
// session ends, or at once when the name is invalid or the session has
// ended already; Err then says which. Redis errors do not end it (reads and
// subscriptions are retried with a growing pause, up to a second, for as
// long as ctx and the session last), except a refusal that retrying cannot
// fix, such as a missing ACL permission: the observation then ends with
// that error, which matches session.ErrRedisRefused. It runs in a goroutine owned by the
// session, which Session.Close waits for.
func (e *Election) Observer(ctx context.Context) *Observer {
	o := &Observer{c: make(chan Leader, 1)}
	if err := e.check(""); err != nil {
		o.end(err)
		return o
	}
	started := hook.Go(e.s, func(sctx context.Context) {
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		defer context.AfterFunc(sctx, func() { cancel(context.Cause(sctx)) })()
		if err := e.observe(ctx, o.c); err != nil {
			o.end(err)
			return
		}
		o.end(context.Cause(ctx)) // observe returned nil: ctx has ended
	})
	if !started { // the session has ended (Go refuses only then)
		o.end(context.Cause(e.s.Context()))
	}
	return o
}

// C returns the channel that receives the leader at every change, closed
// when the observation ends. It is the same channel at every call.
func (o *Observer) C() <-chan Leader { return o.c }

// Err returns nil while the observation runs. Once it has ended it returns
// why, and Err is set before C is closed, so a reader that finds C closed
// (a for range loop over C ends) gets the reason:
//
//   - ctx's cause (context.Cause) when the ctx passed to Observer ended;
//   - the session's end, an error matching session.ErrLeaseLost or
//     session.ErrClosed, when the session ended first;
//   - an error matching session.ErrInvalidName when the election's name is
//     invalid (see session.CheckName);
//   - an error matching session.ErrRedisRefused when Redis refused a read
//     or the subscription for good (a missing ACL permission).
func (o *Observer) Err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

// end records why the observation ended, then closes c.
func (o *Observer) end(err error) {
	o.mu.Lock()
	o.err = err
	o.mu.Unlock()
	close(o.c)
}

// Observe is Observer(ctx).C(): a channel that receives the leader every
// time it changes, starting with the current one (a zero Leader means nobody
// leads), closed when ctx ends or the session ends, or at once when the name
// is invalid. Use Observer to learn why the channel was closed.
func (e *Election) Observe(ctx context.Context) <-chan Leader {
	return e.Observer(ctx).C()
}

// observe delivers the leader's changes to out until ctx ends (it returns
// nil then), or until Redis refuses a read or the subscription for good
// (it returns that refusal).
func (e *Election) observe(ctx context.Context, out chan Leader) error {
	ch := hook.Env(e.s, e.name).K.ElectionChannel(e.name)
	msgs := make(chan string, 1)
	var last *Leader
	deliver := func(l Leader) {
		if last != nil && *last == l {
			return
		}
		last = &l
		select {
		case <-out: // drop the unread older value
		default:
		}
		out <- l
	}
	retry := 100 * time.Millisecond
	for ctx.Err() == nil {
		// The lease the name's calls run on: a sharded session's copy of
		// the name's shard may end and be replaced, and the watch with it.
		l, err := hook.LeaseFor(ctx, e.s, e.name)
		var recheck, ended <-chan struct{}
		stop := func() {}
		if err == nil {
			recheck, ended = l.Recheck(), l.Done()
			stop, err = l.Watch(ctx, ch, msgs)
		}
		if err != nil {
			if err := hook.Refusal(err); errors.Is(err, session.ErrRedisRefused) {
				return fmt.Errorf("election %q: observe: %w", e.name, err)
			}
			if !sleep(ctx, retry) {
				return nil
			}
			retry = min(2*retry, time.Second)
			continue
		}
		retry = 100 * time.Millisecond
		// Read after subscribing: no change can fall in between.
		for alive := true; alive; {
			l, ttl, err := e.read(ctx)
			if errors.Is(err, session.ErrRedisRefused) {
				stop()
				return err
			}
			next := time.Second
			if err == nil {
				deliver(l)
				if ttl > 0 {
					next = ttl + 5*time.Millisecond
				}
			}
			t := time.NewTimer(next)
			select {
			case <-msgs:
			case <-t.C:
			case <-recheck:
				alive = false
			case <-ended:
				alive = false
			case <-ctx.Done():
				alive = false
			}
			t.Stop()
		}
		stop()
	}
	return nil
}

// sleep waits d; it reports false when ctx ends first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// ManagerObserver is Observer for the election name on m's live session,
// across sessions: when that session's lease is lost, the observation goes
// on with the session m opens next (as election.Run campaigns again), and
// the channel gets the leader read on it, unless it is the one it had.
// Between the two sessions nothing is delivered: the last value received
// may then be stale, as it may be while any observer's session waits for
// Redis.
//
// The observation ends, and the channel is closed, when ctx ends, when m is
// closed (Err matches session.ErrManagerClosed or session.ErrClosed), when
// the name is invalid (session.ErrInvalidName), or when Redis refuses a
// read for good (session.ErrRedisRefused). It runs in a goroutine of its
// own, which ends then: end ctx or close m to stop it.
func ManagerObserver(ctx context.Context, m *session.Manager, name string) *Observer {
	o := &Observer{c: make(chan Leader, 1)}
	if err := session.CheckName(name); err != nil {
		o.end(fmt.Errorf("election: %w", err))
		return o
	}
	go func() {
		var last *Leader
		err := m.Run(ctx, func(ctx context.Context, s *session.Session) error {
			in := New(s, name).Observer(ctx)
			for l := range in.C() {
				if last != nil && *last == l {
					continue
				}
				last = &l
				select {
				case <-o.c: // drop the unread older value
				default:
				}
				o.c <- l
			}
			return in.Err()
		})
		o.end(err)
	}()
	return o
}
