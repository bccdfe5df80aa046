package leaseholdtest_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/mutex"
	"github.com/leasehold/leasehold/session"
)

// reindex is the code under test: it works through batches under the mutex
// "reindex" and must stop as soon as the lock is lost.
func reindex(ctx context.Context, s *session.Session, batches <-chan int) error {
	h, err := mutex.New(s, "reindex").Lock(ctx)
	if err != nil {
		return err
	}
	defer h.Release(context.Background())
	for {
		select {
		case <-h.Done():
			return fmt.Errorf("reindex: lock lost: %w", context.Cause(h.Context()))
		case b, ok := <-batches:
			if !ok {
				return nil
			}
			_ = b // write batch b, passing h.Token() to the store
		}
	}
}

// why says why reindex stopped, as the code under test would report it.
func why(err error) string {
	switch {
	case errors.Is(err, session.ErrLeaseLost):
		return "the lease could not be renewed (Redis unreachable)"
	case errors.Is(err, session.ErrLost):
		return "an operator took the lock away"
	}
	return fmt.Sprint(err)
}

// runReindex starts reindex on s and returns once it holds the lock (it
// has taken a batch), with the channel its result arrives on.
func runReindex(s *session.Session) <-chan error {
	batches := make(chan int)
	done := make(chan error, 1)
	go func() { done <- reindex(context.Background(), s, batches) }()
	batches <- 1
	return done
}

// wait returns reindex's result; a test bounds every wait.
func wait(done <-chan error) error {
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		log.Fatal("reindex did not stop")
		return nil
	}
}

// A test of reindex's "my lock was lost" paths. In a real test, t is the
// test's *testing.T; here exampleT stands in for it.
func Example() {
	t := &exampleT{}
	defer t.cleanup()

	srv := leaseholdtest.New(t)

	// Redis stops answering: within about one TTL (1s), before the lease
	// could expire on the server, the hold's context is canceled.
	done := runReindex(srv.Session(t, session.Options{}))
	srv.Pause()
	fmt.Println("paused:", why(wait(done)))
	srv.Resume()

	// An operator force-releases the mutex: the hold ends at once, the
	// session lives on.
	s := srv.Session(t, session.Options{})
	done = runReindex(s)
	srv.ResetMutex(t, "reindex")
	fmt.Println("reset:", why(wait(done)))
	fmt.Println("session still alive:", s.Err() == nil)

	// Output:
	// paused: the lease could not be renewed (Redis unreachable)
	// reset: an operator took the lock away
	// session still alive: true
}

// exampleT is the part of *testing.T the kit uses.
type exampleT struct{ cleanups []func() }

func (*exampleT) Helper()            {}
func (*exampleT) Name() string       { return "Example" }
func (t *exampleT) Cleanup(f func()) { t.cleanups = append(t.cleanups, f) }
func (*exampleT) Fatalf(format string, args ...any) {
	log.Fatalf(format, args...)
}

// cleanup runs the cleanups, last registered first, as testing does.
func (t *exampleT) cleanup() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
}
