package session_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/mutex"
	"github.com/leasehold/leasehold/session"
)

// TestManagerRunAfterRestartEmpty: Redis goes down in the middle of a Run
// and stays down past the session's deadline, so the session is lost (a
// restart grace reclaims only within it), then restarts without its data;
// Run runs fn again on a new session once the restart grace is over.
func TestManagerRunAfterRestartEmpty(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	testutil.InitEpoch(t, srv.Addr(), ns)
	c := testutil.Client(t, srv.Addr())
	m := session.NewManager(c, session.Options{Namespace: ns, TTL: time.Second, RestartGrace: time.Second})
	defer m.Close()

	type run struct {
		s     *session.Session
		sid   string
		token int64
	}
	runs := make(chan run, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- m.Run(ctx, func(ctx context.Context, s *session.Session) error {
			h, err := mutex.New(s, "job").Lock(ctx)
			if err != nil {
				return err
			}
			runs <- run{s, s.ID(), h.Token()}
			select {
			case <-h.Done():
				return h.Err()
			case <-ctx.Done():
				return h.Release(context.Background())
			}
		})
	}()
	first := <-runs
	srv.Kill()
	<-first.s.Done()
	srv.Restart()
	var second run
	select {
	case second = <-runs:
	case <-ctx.Done():
		t.Fatal("fn was not run again after the restart")
	}
	if second.sid == first.sid {
		t.Fatalf("fn ran again on the same session %s", first.sid)
	}
	if second.token <= first.token {
		t.Fatalf("token %d after a restart-empty, before it %d: not increasing", second.token, first.token)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run after ctx cancel: %v, want context.Canceled", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Session(context.Background()); !errors.Is(err, session.ErrManagerClosed) {
		t.Fatalf("Session after Close: %v, want ErrManagerClosed", err)
	}
}

// TestManagerSessionRetriesUntilCtx: with Redis down, Session retries until
// its ctx ends, and succeeds once Redis is back.
func TestManagerSessionRetriesUntilCtx(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	c := testutil.Client(t, srv.Addr())
	m := session.NewManager(c, session.Options{Namespace: ns, TTL: time.Second})
	defer m.Close()
	srv.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	start := time.Now()
	_, err := m.Session(ctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Session with Redis down: %v, want DeadlineExceeded", err)
	}
	if el := time.Since(start); el > 1500*time.Millisecond {
		t.Fatalf("Session returned %v after a 300ms ctx", el)
	}
	srv.Restart()
	s, err := m.Session(testutil.Ctx(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	s2, err := m.Session(testutil.Ctx(t, 10*time.Second))
	if err != nil || s2 != s {
		t.Fatalf("second Session = %v, %v; want the same live session", s2, err)
	}
	if _, err := session.NewManager(c, session.Options{TTL: -1}).Session(context.Background()); !errors.Is(err, session.ErrInvalidOptions) {
		t.Fatalf("invalid options: %v, want ErrInvalidOptions", err)
	}
}

// TestManagerSessionAfterLossHonoursCtx: the live session was lost to a
// paused Redis, and closing it waits for its cleanup (up to a TTL). Session
// must not wait for that: it returns at its ctx's end, and Close waits for
// the lost session's goroutines.
func TestManagerSessionAfterLossHonoursCtx(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	testutil.InitEpoch(t, srv.Addr(), ns)
	c := testutil.Client(t, srv.Addr())
	ctx := testutil.Ctx(t, 30*time.Second)
	m := session.NewManager(c, session.Options{Namespace: ns, TTL: 2 * time.Second})
	defer m.Close()
	s, err := m.Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mutex.New(s, "m").TryLock(ctx); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	defer srv.Cont()
	select {
	case <-s.Done():
	case <-ctx.Done():
		t.Fatal("session not lost with Redis paused")
	}
	sctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = m.Session(sctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Session with Redis paused: %v, want DeadlineExceeded", err)
	}
	if el := time.Since(start); el > 500*time.Millisecond {
		t.Fatalf("Session returned %v after a 100ms ctx: it waited for the lost session's cleanup", el)
	}
}
