package session

import (
	"context"
	"strconv"
	"strings"

	"github.com/redis/rueidis"
)

// The session subscribes to its own channel {ns}:n:<sid> on a dedicated
// connection, lazily, the first time something waits. Releasing scripts
// publish "g|<hid>|<token>|<resource>" when they hand a resource to one of
// this session's waiters, and "r|<hid>" when they take a hold away. Both are
// hints: a waiter re-checks after a reconnect and on a slow fallback timer,
// and the heartbeat reports taken-away holds within one interval.

// subscribe returns once the session's channel is subscribed.
func (s *Session) subscribe(ctx context.Context) error {
	if s.subOK.Load() {
		return nil
	}
	reply := make(chan error, 1)
	if !s.post(func(l *loop) { l.wantSub(reply) }) {
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

func (l *loop) wantSub(reply chan error) {
	if l.sub != nil {
		reply <- nil
		return
	}
	l.subWant = append(l.subWant, reply)
	if l.subbing {
		return
	}
	l.subbing = true
	s := l.s
	ctx, cancel := context.WithDeadline(l.bg, l.deadline)
	l.wg.Go(func() {
		defer cancel()
		dc, release := s.env.C.Dedicate()
		errc := dc.SetPubSubHooks(rueidis.PubSubHooks{OnMessage: s.onMessage})
		ch := s.env.K.Channel(s.id)
		cmd := dc.B().Subscribe().Channel(ch).Build()
		if s.env.Sharded {
			cmd = dc.B().Ssubscribe().Channel(ch).Build()
		}
		err := dc.Do(ctx, cmd).Error()
		if err != nil {
			dc.Close()
			release()
		}
		l.subDone <- subResult{dc: dc, release: func() { dc.Close(); release() }, errc: errc, err: err}
	})
}

func (l *loop) onSubscribed(r subResult) {
	l.subbing = false
	if r.err == nil {
		l.sub, l.subRelease, l.subErr = r.dc, r.release, r.errc
		l.s.subOK.Store(true)
	} else {
		l.s.opt.Logger.Warn("subscribe failed", "session", l.s.id, "err", r.err)
	}
	for _, w := range l.subWant {
		w <- r.err
	}
	l.subWant = nil
}

// onSubscriptionLost drops the broken subscription and makes every waiter
// re-check, since notifications may have been missed; waiters subscribe again.
func (l *loop) onSubscriptionLost(err error) {
	l.s.opt.Logger.Info("notification connection lost; waiters re-check", "session", l.s.id, "err", err)
	l.s.subOK.Store(false)
	l.subRelease()
	l.sub, l.subRelease, l.subErr = nil, nil, nil
	rc := make(chan struct{})
	old := l.s.recheck.Swap(&rc)
	close(*old)
}

// onMessage runs on rueidis' reader goroutine.
func (s *Session) onMessage(m rueidis.PubSubMessage) {
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
	case "r":
		select {
		case s.reqs <- func(l *loop) { l.revoke(rest) }:
		default: // the heartbeat reports it anyway
		}
	}
}
