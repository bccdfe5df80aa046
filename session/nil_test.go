package session_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/election"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/flight"
	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/mutex"
	"github.com/leasehold/leasehold/pool"
	"github.com/leasehold/leasehold/rwmutex"
	"github.com/leasehold/leasehold/semaphore"
	"github.com/leasehold/leasehold/session"
)

// TestNilSessionAndClient: a primitive built on a nil *Session fails every
// call with ErrNilSession instead of panicking, and a Manager given a nil
// client fails with ErrInvalidOptions.
func TestNilSessionAndClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	calls := map[string]func() error{
		"mutex.Lock":    func() error { _, err := mutex.New(nil, "m").Lock(ctx); return err },
		"mutex.TryLock": func() error { _, err := mutex.New(nil, "m").TryLock(ctx); return err },
		"mutex.Holder":  func() error { _, err := mutex.New(nil, "m").Holder(ctx); return err },
		"rwmutex.RLock": func() error { _, err := rwmutex.New(nil, "rw").RLock(ctx); return err },
		"rwmutex.Lock":  func() error { _, err := rwmutex.New(nil, "rw").Lock(ctx); return err },
		"semaphore.Acquire": func() error {
			_, err := semaphore.New(nil, "s", 2).Acquire(ctx, 1)
			return err
		},
		"semaphore.Stats":   func() error { _, err := semaphore.New(nil, "s", 2).Stats(ctx); return err },
		"pool.Acquire":      func() error { _, err := pool.New(nil, "p").Acquire(ctx); return err },
		"pool.Add":          func() error { return pool.New(nil, "p").Add(ctx, "k") },
		"election.Campaign": func() error { _, err := election.New(nil, "e").Campaign(ctx, "v"); return err },
		"election.Leader":   func() error { _, err := election.New(nil, "e").Leader(ctx); return err },
		"election.Observer": func() error {
			o := election.New(nil, "e").Observer(ctx)
			for range o.C() {
			}
			return o.Err()
		},
		"flight.Do": func() error {
			_, err := flight.New(nil, "f", flight.Options{}).Do(ctx, "k", func(context.Context) ([]byte, error) { return nil, nil })
			return err
		},
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, session.ErrNilSession) {
			t.Errorf("%s on a nil session: %v, want ErrNilSession", name, err)
		}
	}
	m := session.NewManager(nil, session.Options{Namespace: "nil"})
	if _, err := m.Session(ctx); !errors.Is(err, session.ErrInvalidOptions) {
		t.Errorf("Manager.Session with a nil client: %v, want ErrInvalidOptions", err)
	}
	if err := m.Close(); err != nil {
		t.Errorf("Manager.Close with a nil client: %v", err)
	}
}

// TestNilArguments: a nil client, Manager or function fails with an error
// matching ErrInvalidOptions before anything is sent, instead of
// panicking once a session (or a leadership) exists.
func TestNilArguments(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	c := testutil.Client(t, srv.Addr())
	ctx := testutil.Ctx(t, 10*time.Second)
	fn := func(context.Context, *session.Session) error { return nil }
	lead := func(context.Context) error { return nil }
	var nilManager *session.Manager
	m := session.NewManager(c, session.Options{Namespace: redistest.Namespace(t)})
	t.Cleanup(func() { _ = m.Close() })
	calls := map[string]func() error{
		"session.New(nil client)": func() error { _, err := session.New(ctx, nil, session.Options{}); return err },
		"nil Manager's Run":       func() error { return nilManager.Run(ctx, fn) },
		"nil Manager's Session":   func() error { _, err := nilManager.Session(ctx); return err },
		"Manager.Run(nil)":        func() error { return m.Run(ctx, nil) },
		"election.Run(nil lead)":  func() error { return election.Run(ctx, m, "e", "v", nil) },
		"election.Run(nil Manager)": func() error {
			return election.Run(ctx, nilManager, "e", "v", lead)
		},
		"election.ManagerObserver(nil Manager)": func() error {
			o := election.ManagerObserver(ctx, nilManager, "e")
			for range o.C() {
			}
			return o.Err()
		},
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, session.ErrInvalidOptions) {
			t.Errorf("%s: %v, want ErrInvalidOptions", name, err)
		}
	}
	if n, err := c.Do(ctx, c.B().Dbsize().Build()).AsInt64(); err != nil || n != 0 {
		t.Fatalf("DBSIZE = %d, %v after calls with nil arguments; want 0 (no session opened, nothing campaigned)", n, err)
	}
}

// TestClientOfDial: a session from Dial gives its client, on which a
// fence store works (the README's fencing example).
func TestClientOfDial(t *testing.T) {
	addr := redistest.Addr(t)
	ctx := testutil.Ctx(t, 10*time.Second)
	s := testutil.Dial(t, addr, redistest.Namespace(t), session.Options{TTL: 5 * time.Second})
	st := fence.New(s.Client(), "client-of-dial")
	if err := st.Set(ctx, "k", []byte("v"), 2); err != nil {
		t.Fatal(err)
	}
	if err := st.Set(ctx, "k", []byte("old"), 1); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("a write with an older token through s.Client(): %v, want ErrStale", err)
	}
}
