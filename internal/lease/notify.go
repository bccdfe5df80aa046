package lease

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/rueidis"
)

// The session subscribes, lazily and on one dedicated connection, to its own
// channel {ns}:n:<sid> (the first time something waits) and to the channels
// its watchers ask for (election observers). Releasing scripts publish
// "g|<hid>|<token>|<resource>" when they hand a resource to one of this
// session's waiters, "r|<hid>" when they take a hold away, and "x|<hid>" when
// a waiter should re-check. All of them are hints: after the connection
// drops, or the server drops the subscription while the connection stays up
// (Redis Cluster does when the channels' slot moves to another node), the
// recheck channel is closed, every waiter and watcher re-reads the state and
// subscribes again, on a new connection to the slot's current owner; waiters
// also have a slow fallback timer, and the heartbeat reports taken-away
// holds within one interval.

// subWant is a request to be subscribed to ch.
type subWant struct {
	ch    string
	reply chan error
}

// subscribe returns once channel ch is subscribed on the session's
// notification connection.
func (s *Session) subscribe(ctx context.Context, ch string) error {
	if ch == s.ownChannel && s.subOK.Load() {
		return nil
	}
	reply := make(chan error, 1)
	if !s.post(func(l *loop) { l.want(subWant{ch: ch, reply: reply}) }) {
		return s.Err()
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-s.exited:
		return s.Err()
	}
}

// want queues w and runs pump.
func (l *loop) want(w subWant) {
	l.subWant = append(l.subWant, w)
	l.pump()
}

// pump answers the wants already satisfied and starts one subscribe helper
// for the rest: a new connection subscribed to every channel in use, or a
// SUBSCRIBE of the missing channels on the current one.
func (l *loop) pump() {
	if l.exit {
		return // shutting down: no helper may start; shutdown answers the wants
	}
	kept := l.subWant[:0]
	missing := map[string]bool{}
	for _, w := range l.subWant {
		if l.sub != nil && l.subChans[w.ch] {
			w.reply <- nil
			continue
		}
		kept = append(kept, w)
		missing[w.ch] = true
	}
	l.subWant = kept
	if len(kept) == 0 || l.subbing {
		return
	}
	l.subbing = true
	s := l.s
	dc := l.sub
	if dc == nil {
		missing[s.ownChannel] = true
		for ch := range s.watchers.channels() {
			missing[ch] = true
		}
	}
	chans := make([]string, 0, len(missing))
	for ch := range missing {
		chans = append(chans, ch)
	}
	ctx, cancel := context.WithDeadline(l.bg, l.deadline)
	l.wg.Go(func() {
		defer cancel()
		r := subResult{chans: chans}
		if dc == nil {
			d, release, err := s.dedicate(ctx)
			if err != nil {
				r.err = err
				l.subDone <- r
				return
			}
			s.hook(&r, d, release)
			dc = d
		}
		r.err = dc.Do(ctx, s.subscribeCmd(dc, chans)).Error()
		if addr, moved := movedTo(r.err); moved && r.dc != nil {
			// Redis Cluster moved the channels' slot (failover, slot
			// migration) and rueidis, whose slot map learns it lazily, gave
			// a connection to the old owner. Subscribe where MOVED points
			// at once, rather than fail the waiters onto their fallback
			// re-check until the map is refreshed.
			if n, ok := s.env.C.Nodes()[addr]; ok {
				go r.release()
				r.dc, r.release, r.errc, r.dropped = nil, nil, nil, nil
				d, release, err := dedicateOn(ctx, n)
				if err != nil {
					r.err = err
					l.subDone <- r
					return
				}
				s.hook(&r, d, release)
				r.err = d.Do(ctx, s.subscribeCmd(d, chans)).Error()
			}
		}
		l.subDone <- r
	})
}

// subscribeCmd builds the SUBSCRIBE (SSUBSCRIBE on Redis Cluster) of chans.
func (s *Session) subscribeCmd(d rueidis.DedicatedClient, chans []string) rueidis.Completed {
	if s.env.Sharded {
		return d.B().Ssubscribe().Channel(chans...).Build()
	}
	return d.B().Subscribe().Channel(chans...).Build()
}

// hook makes d, a new notification connection that release gives back, the
// one of r: messages go to onMessage, and a subscription the server drops
// is reported on r.dropped.
func (s *Session) hook(r *subResult, d rueidis.DedicatedClient, release func()) {
	dropped := make(chan struct{}, 1)
	r.errc = d.SetPubSubHooks(rueidis.PubSubHooks{
		OnMessage: s.onMessage,
		OnSubscription: func(ps rueidis.PubSubSubscription) {
			if unsubscribed(ps.Kind) {
				select {
				case dropped <- struct{}{}:
				default:
				}
			}
		},
	})
	r.dc, r.release, r.dropped = d, func() { d.Close(); release() }, dropped
}

// movedTo returns the address a MOVED error points to.
func movedTo(err error) (string, bool) {
	if e, ok := rueidis.IsRedisErr(err); ok {
		return e.IsMoved()
	}
	return "", false
}

// dedicateOn is Dedicate of c bounded by ctx (see dedicate), for the rare
// subscribe on the node a MOVED names: a connection that arrives after ctx
// ended is given back.
func dedicateOn(ctx context.Context, c rueidis.Client) (rueidis.DedicatedClient, func(), error) {
	ch := startDedicate(c)
	select {
	case got := <-ch:
		return got.d, got.release, nil
	case <-ctx.Done():
		go giveBackWhenDedicated(ch)
		return nil, nil, ctx.Err()
	}
}

// startDedicate runs c.Dedicate in a goroutine of its own (it takes no
// context) and returns the channel its connection arrives on.
func startDedicate(c rueidis.Client) chan dedicated {
	ch := make(chan dedicated, 1)
	go func() {
		d, release := c.Dedicate()
		ch <- dedicated{d, release}
	}()
	return ch
}

// giveBackWhenDedicated closes and gives back the connection arriving on
// ch, once it arrives: one nobody waits for any more.
func giveBackWhenDedicated(ch chan dedicated) {
	got := <-ch
	got.d.Close()
	got.release()
}

// dedicated is what rueidis' Dedicate returns.
type dedicated struct {
	d       rueidis.DedicatedClient
	release func()
}

// dedicate returns a dedicated connection of the session's client, or ctx's
// error when ctx ends first: rueidis' Dedicate takes no context, dials
// inline (up to ConnWriteTimeout on a stalled server) and waits as long as
// the client's dedicated pool is used up, none of which may hold the
// session's helpers (and so Close) past their deadline. A Dedicate still in
// flight when ctx ends is kept for the next attempt rather than started
// again, so an exhausted pool costs one waiting goroutine, not one per
// attempt; dropDedicate gives back what it brings after the session ended.
// One subscribe helper runs at a time, so one caller at most waits on it.
// A Group's copy attaches to the Group's connection instead (sharedSub).
func (s *Session) dedicate(ctx context.Context) (rueidis.DedicatedClient, func(), error) {
	if s.sub != nil {
		return s.sub.dedicate(ctx)
	}
	s.dedMu.Lock()
	ch := s.dedCh
	if ch == nil {
		ch = startDedicate(s.env.C)
		s.dedCh = ch
	}
	s.dedMu.Unlock()
	select {
	case got := <-ch:
		s.dedMu.Lock()
		s.dedCh = nil
		s.dedMu.Unlock()
		return got.d, got.release, nil
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
}

// dropDedicate gives back the connection of a Dedicate still in flight when
// the session ends, once it arrives.
func (s *Session) dropDedicate() {
	s.dedMu.Lock()
	ch := s.dedCh
	s.dedCh = nil
	s.dedMu.Unlock()
	if ch != nil {
		go giveBackWhenDedicated(ch)
	}
}

func (l *loop) onSubscribed(r subResult) {
	l.subbing = false
	if r.err != nil {
		l.log.Warn("subscribe failed", "session", l.s.id, "err", r.err)
		if r.dc != nil {
			l.giveBack(r.release)
		}
		for _, w := range l.subWant {
			w.reply <- r.err
		}
		l.subWant = nil
		return
	}
	if r.dc == nil && l.sub == nil {
		// It ran on a connection whose loss was handled first (both were
		// ready in the loop's select): its channels went with it. Subscribe
		// the waiters again on a new one.
		l.pump()
		return
	}
	if r.dc != nil {
		l.sub, l.subRelease, l.subErr, l.subDropped = r.dc, r.release, r.errc, r.dropped
		l.subChans = map[string]bool{}
	}
	for _, ch := range r.chans {
		l.subChans[ch] = true
	}
	l.s.subOK.Store(l.subChans[l.s.ownChannel])
	l.pump()
}

// onSubscriptionLost drops the broken connection and makes every waiter and
// watcher re-check, since messages may have been missed; they subscribe again.
func (l *loop) onSubscriptionLost(err error) {
	l.log.Warn("notifications interrupted; waiters re-check and subscribe again", "session", l.s.id, "err", err)
	l.dropSubscription()
	rc := make(chan struct{})
	old := l.s.recheck.Swap(&rc)
	close(*old)
}

func (l *loop) dropSubscription() {
	l.s.subOK.Store(false)
	if l.sub != nil {
		l.giveBack(l.subRelease)
	}
	l.sub, l.subRelease, l.subErr, l.subDropped, l.subChans = nil, nil, nil, nil, nil
}

// errUnsubscribed reports a subscription the server dropped on a connection
// that stays up.
var errUnsubscribed = errors.New("the server dropped the subscription " +
	"(on Redis Cluster: the slot moved to another node, by a failover or a slot migration)")

// unsubscribed reports whether a subscription event of kind k ends a
// subscription. The session never unsubscribes, so every such event comes
// from the server: Redis Cluster sends "sunsubscribe" when the node loses
// the slot of a shard channel (manual failover, slot migration), and keeps
// the connection open.
func unsubscribed(k string) bool {
	return k == "sunsubscribe" || k == "unsubscribe" || k == "punsubscribe"
}

// giveBack closes a notification connection and returns it to the client,
// in a goroutine of its own: closing a connection to a silent server waits up
// to a second for a PING (rueidis' pipe.Close, docs/rueidis.md), and neither
// the loop's local deadline nor shutdown's cleanup may wait for that.
// Shutdown waits for these goroutines until its cutoff.
func (l *loop) giveBack(release func()) { l.closing.Go(release) }

// onMessage runs on rueidis' reader goroutine.
func (s *Session) onMessage(m rueidis.PubSubMessage) {
	if m.Channel != s.ownChannel {
		s.watchers.deliver(m.Channel, m.Message)
		return
	}
	kind, rest, _ := strings.Cut(m.Message, "|")
	switch kind {
	case "g":
		hid, rest, _ := strings.Cut(rest, "|")
		tok, resource, _ := strings.Cut(rest, "|")
		t, err := strconv.ParseInt(tok, 10, 64)
		if err != nil {
			return
		}
		s.waiters.deliver(hid, notice{token: t, resource: resource})
	case "x":
		s.waiters.deliver(rest, notice{})
	case "r":
		select {
		case s.reqs <- func(l *loop) { l.revoke(rest) }:
		default: // the heartbeat reports it anyway
		}
	}
}

// Watch delivers the messages published on channel ch to c until stop is
// called, without blocking: a message that does not fit in c is dropped, so
// c's reader must re-read the state it watches when it receives, and also
// when Recheck is closed (messages may have been missed). Watch returns once
// ch is subscribed. It is for leasehold's own packages (election.Observe).
func (s *Session) Watch(ctx context.Context, ch string, c chan string) (stop func(), err error) {
	s.watchers.add(ch, c)
	stop = func() { s.watchers.remove(ch, c) }
	if err := s.subscribe(ctx, ch); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

// Recheck returns a channel closed when the notification connection drops:
// whoever waits for a notification must re-read the state, and call Watch
// again to resubscribe.
func (s *Session) Recheck() <-chan struct{} { return *s.recheck.Load() }

// watchers routes channel messages to Watch callers.
type watchers struct {
	mu sync.Mutex                      // guards m
	m  map[string]map[chan string]bool // guarded by mu: channel name to its watchers
}

func (w *watchers) add(ch string, c chan string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[string]map[chan string]bool{}
	}
	if w.m[ch] == nil {
		w.m[ch] = map[chan string]bool{}
	}
	w.m[ch][c] = true
}

func (w *watchers) remove(ch string, c chan string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m[ch], c)
	if len(w.m[ch]) == 0 {
		delete(w.m, ch)
	}
}

func (w *watchers) channels() map[string]bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]bool, len(w.m))
	for ch := range w.m {
		out[ch] = true
	}
	return out
}

func (w *watchers) deliver(ch, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for c := range w.m[ch] {
		select {
		case c <- msg:
		default:
		}
	}
}
