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
