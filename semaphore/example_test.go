package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/semaphore"
	"github.com/leasehold/leasehold/session"
)

// At most 4 requests in flight to a partner API, across every process of the
// deployment. The example runs on an in-process miniredis so that it is
// self-contained; point InitAddress at a real Redis in production.
func Example() {
	mr, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	ctx := context.Background()

	// ForceSingleClient, DisableCache and MarkIntact are for this in-process
	// miniredis only: production code passes Dial just the address.
	// miniredis answers CLUSTER commands like a one-node cluster (rueidis
	// tells a real standalone Redis from a cluster by itself) and has no
	// client-side caching, which the client MarkIntact builds from opt
	// would ask for (Dial turns it off by itself). MarkIntact marks the
	// brand-new namespace as holding all its data, so that the first grant
	// does not wait out the restart grace. On a real Redis the grace is what
	// keeps a data loss from granting a resource twice, and a brand-new
	// namespace's first grant waits it out once.
	opt := rueidis.ClientOption{InitAddress: []string{mr.Addr()}, ForceSingleClient: true, DisableCache: true}
	if err := leaseholdtest.MarkIntact(ctx, opt, ""); err != nil {
		log.Fatal(err)
	}
	s, err := session.Dial(ctx, opt, session.Options{TTL: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	api := semaphore.New(s, "partner-api", 4) // the first user stores the limit
	h, err := api.Acquire(ctx, 3)             // blocks FIFO until 3 permits are granted
	if err != nil {
		log.Fatal(err)
	}
	// Work under h.Context(): it is canceled the moment the hold can no longer
	// be proven, before anyone else can be granted these permits.
	fmt.Println("holding 3 permits of", h.Resource(), "err:", h.Context().Err())

	_, err = api.TryAcquire(ctx, 2)
	fmt.Println("TryAcquire(2):", err)

	st, err := api.Stats(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("limit %d, in use %d, holders %d, waiters %d\n", st.Limit, st.InUse, len(st.Holders), st.Waiters)

	// A deployment configured with another limit notices instead of
	// silently running with two limits.
	_, err = semaphore.New(s, "partner-api", 8).TryAcquire(ctx, 1)
	fmt.Println("limit 8 elsewhere:", errors.Is(err, semaphore.ErrLimitMismatch))

	if err := h.Release(ctx); err != nil {
		log.Fatal(err)
	}
	st, err = api.Stats(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("after Release: in use", st.InUse)
	// Output:
	// holding 3 permits of partner-api err: <nil>
	// TryAcquire(2): semaphore: not enough free permits
	// limit 4, in use 3, holders 1, waiters 0
	// limit 8 elsewhere: true
	// after Release: in use 0
}
