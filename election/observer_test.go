package election_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/election"
	"github.com/leasehold/leasehold/internal/hook"
	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/session"
)

// TestObserverErr: an Observer's Err is nil while it runs and, once its
// channel is closed, says why: the ctx's cause, the session's end (closed
// or lost), or an invalid name.
func TestObserverErr(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)

	t.Run("invalid name", func(t *testing.T) {
		ctx := testutil.Ctx(t, 10*time.Second)
		s := testutil.Dial(t, addr, ns, session.Options{TTL: 5 * time.Second})
		for _, name := range testutil.InvalidNames() {
			o := election.New(s, name).Observer(ctx)
			if err := closedAtOnce(t, o); !errors.Is(err, session.ErrInvalidName) {
				t.Errorf("Observer(%.8q).Err() = %v, want ErrInvalidName", name, err)
			}
		}
	})

	t.Run("ctx canceled", func(t *testing.T) {
		ctx := testutil.Ctx(t, 10*time.Second)
		s := testutil.Dial(t, addr, ns, session.Options{TTL: 5 * time.Second})
		octx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		o := election.New(s, "ctx").Observer(octx)
		if l := recv(t, o.C(), 5*time.Second); l != (election.Leader{}) {
			t.Fatalf("first value with nobody leading = %+v, want the zero Leader", l)
		}
		if err := o.Err(); err != nil {
			t.Fatalf("Err while observing = %v, want nil", err)
		}
		stop := errors.New("shutting down")
		cancel(stop)
		if err := closedErr(t, o, 5*time.Second); err != stop {
			t.Fatalf("Err after the ctx was canceled = %v, want its cause %v", err, stop)
		}
		if s.Err() != nil {
			t.Fatalf("session ended with the observer: %v", s.Err())
		}

		dctx, dcancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer dcancel()
		o = election.New(s, "ctx").Observer(dctx)
		if err := closedErr(t, o, 5*time.Second); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Err after the ctx's deadline = %v, want DeadlineExceeded", err)
		}
	})

	t.Run("session closed", func(t *testing.T) {
		ctx := testutil.Ctx(t, 10*time.Second)
		s := testutil.Dial(t, addr, ns, session.Options{TTL: 5 * time.Second})
		o := election.New(s, "closed").Observer(ctx)
		recv(t, o.C(), 5*time.Second)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := closedErr(t, o, 5*time.Second); !errors.Is(err, session.ErrClosed) {
			t.Fatalf("Err after Session.Close = %v, want ErrClosed", err)
		}
		// On a session that has ended already: closed at once, same reason.
		o = election.New(s, "closed").Observer(ctx)
		if err := closedAtOnce(t, o); !errors.Is(err, session.ErrClosed) {
			t.Fatalf("Err of an Observer on a closed session = %v, want ErrClosed", err)
		}
	})

	t.Run("session lost", func(t *testing.T) {
		srv := redistest.Start(t, redistest.Options{})
		ctx := testutil.Ctx(t, 10*time.Second)
		s := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: time.Second})
		t.Cleanup(srv.Cont) // before the session's Close (cleanups run last first)
		o := election.New(s, "lost").Observer(ctx)
		recv(t, o.C(), 5*time.Second)
		srv.Stop() // SIGSTOP: no heartbeat is confirmed any more
		err := closedErr(t, o, 5*time.Second)
		if !errors.Is(err, session.ErrLeaseLost) {
			t.Fatalf("Err after the lease was lost = %v, want ErrLeaseLost", err)
		}
		if !errors.Is(s.Err(), session.ErrLeaseLost) {
			t.Fatalf("session Err = %v, want ErrLeaseLost", s.Err())
		}
	})
}

// closedErr reads o's channel until it is closed, failing the test if that
// takes longer than d, and returns o.Err() read right after the close.
func closedErr(t *testing.T, o *election.Observer, d time.Duration) error {
	t.Helper()
	timeout := time.NewTimer(d)
	defer timeout.Stop()
	for {
		select {
		case _, ok := <-o.C():
			if !ok {
				err := o.Err()
				if err == nil {
					t.Fatal("channel closed with Err() == nil")
				}
				return err
			}
		case <-timeout.C:
			t.Fatalf("Observer channel not closed within %v", d)
		}
	}
}

// closedAtOnce checks that o's channel was closed, with no value, before
// Observer returned, and returns o.Err().
func closedAtOnce(t *testing.T, o *election.Observer) error {
	t.Helper()
	select {
	case l, ok := <-o.C():
		if ok {
			t.Fatalf("Observer delivered %+v, want its channel closed at once", l)
		}
	default:
		t.Fatal("Observer channel open, want it closed at once")
	}
	return o.Err()
}

// TestManagerObserverFollowsSessions: a ManagerObserver goes on observing
// after its session's lease is lost, on the session the Manager opens
// next, and ends when the Manager is closed.
func TestManagerObserverFollowsSessions(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	testutil.InitEpoch(t, addr, ns)
	ctx := testutil.Ctx(t, 20*time.Second)
	probe := testutil.Client(t, addr)
	m := session.NewManager(testutil.Client(t, addr), session.Options{Namespace: ns, TTL: time.Second})
	t.Cleanup(func() { m.Close() })
	leader := testutil.Dial(t, addr, ns, session.Options{TTL: 5 * time.Second})

	if err := closedAtOnce(t, election.ManagerObserver(ctx, m, "")); !errors.Is(err, session.ErrInvalidName) {
		t.Fatalf("ManagerObserver with an empty name: Err = %v, want ErrInvalidName", err)
	}
	o := election.ManagerObserver(ctx, m, "followed")
	if l := recv(t, o.C(), 5*time.Second); l != (election.Leader{}) {
		t.Fatalf("first value with nobody leading = %+v, want the zero Leader", l)
	}
	h, err := election.New(leader, "followed").Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if l := recv(t, o.C(), 5*time.Second); l.Value != "a" || l.Session != leader.ID() {
		t.Fatalf("after a campaign: %+v, want a led by %s", l, leader.ID())
	}

	// The observer's session loses its lease (deleted behind its back).
	s, err := m.Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := probe.Do(ctx, probe.B().Del().Key(hook.Env(s, "").K.Lease(s.ID())).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Context().Done():
	case <-ctx.Done():
		t.Fatal("the observer's session outlived its deleted lease")
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Observed on the next session: nobody leads, then b.
	if l := recv(t, o.C(), 5*time.Second); l != (election.Leader{}) {
		t.Fatalf("after the resignation, on the next session: %+v, want the zero Leader", l)
	}
	if _, err := election.New(leader, "followed").Campaign(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if l := recv(t, o.C(), 5*time.Second); l.Value != "b" {
		t.Fatalf("after the second campaign: %+v, want b", l)
	}
	if err := o.Err(); err != nil {
		t.Fatalf("Err while observing = %v, want nil", err)
	}
	if s2, err := m.Session(ctx); err != nil || s2 == s {
		t.Fatalf("the Manager's session after the loss: %v, %v; want a new one", s2, err)
	}

	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := closedErr(t, o, 5*time.Second); !errors.Is(err, session.ErrManagerClosed) && !errors.Is(err, session.ErrClosed) {
		t.Fatalf("Err after Manager.Close = %v, want ErrManagerClosed or ErrClosed", err)
	}
}
