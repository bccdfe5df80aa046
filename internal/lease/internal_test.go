package lease

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/scripts"
)

// TestSubscribeAnsweredAfterItsConnectionDropped: a SUBSCRIBE on the
// notification connection succeeds, but the loss of that connection reaches
// the loop first (both are ready in its select). The late success must not
// touch the dropped connection's state (it panicked on a nil map, killing
// the process), and a want queued meanwhile is served by a new connection.
func TestSubscribeAnsweredAfterItsConnectionDropped(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	srv.Do(t, "SET", scripts.NewKeys(ns).Epoch(), "0") // namespace intact: no restart grace
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := New(ctx, srv.Client(t), Options{Namespace: ns, TTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.subscribe(ctx, s.ownChannel); err != nil {
		t.Fatal(err)
	}

	queued := make(chan error, 1)
	recovered := make(chan any, 1)
	s.post(func(l *loop) {
		defer func() { recovered <- recover() }()
		l.subbing = true                                                   // a SUBSCRIBE on l.sub is in flight...
		l.subWant = append(l.subWant, subWant{ch: "other", reply: queued}) // ...a want waits for it...
		l.onSubscriptionLost(errors.New("connection lost (injected)"))
		l.onSubscribed(subResult{chans: []string{"x"}}) // ...and it succeeded
	})
	if r := <-recovered; r != nil {
		t.Fatalf("late subscribe result after the connection was dropped: panic %v", r)
	}
	select {
	case err := <-queued:
		if err != nil {
			t.Fatalf("queued want: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the want queued during the subscribe was never served")
	}
	waitSubscribed(t, ctx, s)
}

// waitSubscribed waits until s's own channel is subscribed.
func waitSubscribed(t *testing.T, ctx context.Context, s *Session) {
	t.Helper()
	for !s.subOK.Load() {
		select {
		case <-ctx.Done():
			t.Fatal("session never subscribed")
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestConcurrentReleaseHonoursCtx: a Release waits for another Release of
// the same hold in flight, which on a paused Redis lasts until its own ctx
// or the TTL ends; it still returns at its own ctx's end.
func TestConcurrentReleaseHonoursCtx(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	srv.Do(t, "SET", scripts.NewKeys(ns).Epoch(), "0")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := New(ctx, srv.Client(t), Options{Namespace: ns, TTL: 4 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h, err := s.Claim(ctx, scripts.Resource{Kind: scripts.Mutex, Name: "m"}, false)
	if err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	defer srv.Cont()
	first := make(chan error, 1)
	go func() { first <- h.Release(ctx) }()
	for h.mu.TryLock() { // until the first Release holds the lock
		h.mu.Unlock()
		select {
		case <-ctx.Done():
			t.Fatal("the first Release never started")
		case <-time.After(time.Millisecond):
		}
	}
	sctx, scancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer scancel()
	start := time.Now()
	err = h.Release(sctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second Release: %v, want DeadlineExceeded", err)
	}
	if el := time.Since(start); el > 500*time.Millisecond {
		t.Fatalf("second Release returned %v after a 100ms ctx", el)
	}
	srv.Cont()
	if err := <-first; err != nil {
		t.Logf("first Release: %v", err) // it may fail on the paused server: retried by the session
	}
}
