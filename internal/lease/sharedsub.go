package lease

import (
	"context"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// sharedSub is the one notification connection of a Group, which its lease
// copies share: each copy's loop subscribes, re-subscribes and reacts to a
// lost connection exactly as an unsharded session's does (notify.go), but
// the dedicated connection its dedicate returns is an attachment to the
// Group's connection, not a connection of its own. So a sharded session
// holds one notification connection, as an unsharded one does, whatever
// the number of shards it waits in.
//
// That is sound because a sharded namespace notifies with PUBLISH, never
// SPUBLISH (scripts.Env.Sharded is false for it, also on a cluster): a
// SUBSCRIBE on any node receives every shard's messages. Each copy's
// channel is its own ({ns#k.x}:n:<copy id>), so the connection routes a
// message to the attachments that subscribed its channel.
//
// When the connection fails, every attachment reports it (its hooks' error
// channel), so every copy's waiters re-check and its loop subscribes again,
// on a new connection that the first of them dials and the others attach
// to. An attachment's Close only detaches it; the connection is closed when
// it fails or when the Group closes (close).
type sharedSub struct {
	c rueidis.Client

	mu      sync.Mutex
	cur     *subConn      // guarded by mu: the live connection, nil when none
	dialing chan struct{} // guarded by mu: closed when the Dedicate in flight ends; nil when none
	closed  bool          // guarded by mu: close was called; no new connection

	wg sync.WaitGroup // the dial and watch goroutines
}

// subConn is one dedicated connection of a sharedSub and its attachments.
type subConn struct {
	d         rueidis.DedicatedClient
	release   func()
	closeOnce sync.Once // close gives the connection back once (release twice would pool it twice)

	mu     sync.Mutex
	att    map[*subAttach]bool            // guarded by mu: attached
	owners map[string]map[*subAttach]bool // guarded by mu: channel to the attachments that subscribed it
	dead   bool                           // guarded by mu: failed or closed; attaches no more
}

// subAttach is what a copy's loop takes for a dedicated connection: the
// shared connection, with hooks and a failure report of its own.
type subAttach struct {
	rueidis.DedicatedClient // the shared connection: B, Do (see Do), ...
	sc                      *subConn

	mu    sync.Mutex
	hooks rueidis.PubSubHooks // guarded by mu
	errc  chan error          // buffer 1; closed once the hooks are called no more
	ended bool                // guarded by mu: errc closed
}

func newSharedSub(c rueidis.Client) *sharedSub { return &sharedSub{c: c} }

// dedicate is Session.dedicate for a copy of a Group: an attachment to the
// Group's connection, dialling one when there is none. A dial still in
// flight when ctx ends goes on for the next caller.
func (sp *sharedSub) dedicate(ctx context.Context) (rueidis.DedicatedClient, func(), error) {
	for {
		sp.mu.Lock()
		if sp.closed {
			sp.mu.Unlock()
			return nil, nil, ErrClosed
		}
		if sc := sp.cur; sc != nil {
			if a := sc.attach(); a != nil {
				sp.mu.Unlock()
				return a, func() {}, nil
			}
			sp.cur = nil // failed: its watch goroutine closes it
		}
		if sp.dialing == nil {
			sp.dial()
		}
		wait := sp.dialing
		sp.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
}

// dial starts a Dedicate; called with mu held.
func (sp *sharedSub) dial() {
	done := make(chan struct{})
	sp.dialing = done
	ch := startDedicate(sp.c)
	sp.wg.Go(func() {
		got := <-ch
		sc := &subConn{d: got.d, release: got.release, att: map[*subAttach]bool{}, owners: map[string]map[*subAttach]bool{}}
		errc := got.d.SetPubSubHooks(rueidis.PubSubHooks{OnMessage: sc.onMessage, OnSubscription: sc.onSubscription})
		sp.mu.Lock()
		closed := sp.closed
		if !closed {
			sp.cur = sc
		}
		sp.dialing = nil
		close(done)
		sp.mu.Unlock()
		if closed {
			sc.close()
		}
		sp.watch(sc, errc)
	})
}

// watch reports the failure of sc to its attachments, then closes it (it
// runs on a goroutine of the sharedSub's).
func (sp *sharedSub) watch(sc *subConn, errc <-chan error) {
	err, ok := <-errc
	if !ok || err == nil {
		err = rueidis.ErrClosing
	}
	sp.mu.Lock()
	if sp.cur == sc {
		sp.cur = nil
	}
	sp.mu.Unlock()
	sc.fail(err)
	sc.close()
}

// close closes the live connection (the copies have closed, so nothing is
// attached) and waits, at most wait, for a dial in flight and the watch
// goroutines (closing a connection to a silent server takes up to a second,
// see giveBack).
func (sp *sharedSub) close(wait time.Duration) {
	sp.mu.Lock()
	sp.closed = true
	sc := sp.cur
	sp.cur = nil
	sp.mu.Unlock()
	if sc != nil {
		sc.fail(ErrClosed)
		sp.wg.Go(sc.close) // its watch goroutine then ends
	}
	done := make(chan struct{})
	go func() {
		sp.wg.Wait()
		close(done)
	}()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// attach returns a new attachment, or nil when sc failed.
func (sc *subConn) attach() *subAttach {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.dead {
		return nil
	}
	a := &subAttach{DedicatedClient: sc.d, sc: sc, errc: make(chan error, 1)}
	sc.att[a] = true
	return a
}

// detach removes a; its channels stay subscribed on the connection, and
// their messages go nowhere (the copy's id is never used again).
func (sc *subConn) detach(a *subAttach) {
	sc.mu.Lock()
	delete(sc.att, a)
	for ch, as := range sc.owners {
		delete(as, a)
		if len(as) == 0 {
			delete(sc.owners, ch)
		}
	}
	sc.mu.Unlock()
	a.end(nil)
}

// fail marks sc dead and ends every attachment with err.
func (sc *subConn) fail(err error) {
	sc.mu.Lock()
	sc.dead = true
	att := make([]*subAttach, 0, len(sc.att))
	for a := range sc.att {
		att = append(att, a)
	}
	sc.att, sc.owners = map[*subAttach]bool{}, map[string]map[*subAttach]bool{}
	sc.mu.Unlock()
	for _, a := range att {
		a.end(err)
	}
}

// close closes the connection and gives it back to the client, once.
func (sc *subConn) close() {
	sc.closeOnce.Do(func() {
		sc.d.Close()
		sc.release()
	})
}

// owned returns the attachments that subscribed ch.
func (sc *subConn) owned(ch string) []*subAttach {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	as := make([]*subAttach, 0, len(sc.owners[ch]))
	for a := range sc.owners[ch] {
		as = append(as, a)
	}
	return as
}

// onMessage and onSubscription run on rueidis' reader goroutine, one call
// at a time; they pass each event to the attachments of its channel.
func (sc *subConn) onMessage(m rueidis.PubSubMessage) {
	for _, a := range sc.owned(m.Channel) {
		if h := a.hook(); h.OnMessage != nil {
			h.OnMessage(m)
		}
	}
}

func (sc *subConn) onSubscription(ps rueidis.PubSubSubscription) {
	for _, a := range sc.owned(ps.Channel) {
		if h := a.hook(); h.OnSubscription != nil {
			h.OnSubscription(ps)
		}
	}
}

// SetPubSubHooks sets a's hooks; the channel it returns reports the shared
// connection's failure, and is closed when a is detached.
func (a *subAttach) SetPubSubHooks(h rueidis.PubSubHooks) <-chan error {
	a.mu.Lock()
	a.hooks = h
	a.mu.Unlock()
	return a.errc
}

func (a *subAttach) hook() rueidis.PubSubHooks {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.hooks
}

// Do sends cmd on the shared connection, recording the channels of a
// SUBSCRIBE as a's first, so that their confirmations and messages reach
// it.
func (a *subAttach) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	if args := cmd.Commands(); len(args) > 1 && args[0] == "SUBSCRIBE" {
		a.sc.mu.Lock()
		if !a.sc.dead && a.sc.att[a] {
			for _, ch := range args[1:] {
				if a.sc.owners[ch] == nil {
					a.sc.owners[ch] = map[*subAttach]bool{}
				}
				a.sc.owners[ch][a] = true
			}
		}
		a.sc.mu.Unlock()
	}
	return a.DedicatedClient.Do(ctx, cmd)
}

// Close detaches a; the connection stays for the other copies.
func (a *subAttach) Close() { a.sc.detach(a) }

// end reports err (when not nil) on a's error channel and closes it, once.
func (a *subAttach) end(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ended {
		return
	}
	a.ended = true
	if err != nil {
		a.errc <- err
	}
	close(a.errc)
}
