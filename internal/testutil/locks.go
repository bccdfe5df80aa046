package testutil

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/leasehold/leasehold/mutex"
	"github.com/leasehold/leasehold/session"
)

// LockRounds runs one goroutine per names[i], each locking and releasing
// mutex names[i] of sessions[i] rounds times at once, and returns the first
// failure: a Lock or Release error, a hold of another resource, a token not
// above the goroutine's previous one, or two holds of one name at a time.
// The goroutines of one session overlap, so their calls go to Redis
// together (internal/scripts/batch.go).
func LockRounds(ctx context.Context, sessions []*session.Session, names []string, rounds int) error {
	inside := map[string]*atomic.Int32{}
	for _, n := range names {
		inside[n] = new(atomic.Int32)
	}
	errs := make(chan error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			m, in := mutex.New(sessions[i], name), inside[name]
			last := int64(0)
			for range rounds {
				h, err := m.Lock(ctx)
				if err != nil {
					errs <- fmt.Errorf("Lock %s: %w", name, err)
					return
				}
				n := in.Add(1)
				switch {
				case n != 1:
					err = fmt.Errorf("%s held %d times at once", name, n)
				case h.Resource() != name:
					err = fmt.Errorf("Lock of %s granted %s", name, h.Resource())
				case h.Token() <= last:
					err = fmt.Errorf("token of %s went from %d to %d", name, last, h.Token())
				}
				last = h.Token()
				in.Add(-1)
				if err == nil {
					err = h.Release(ctx)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs // nil when closed empty
}
