package mutex_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/mutex"
	"github.com/leasehold/leasehold/session"
)

// The example runs on an in-process miniredis so that it is self-contained;
// point InitAddress at a real Redis in production.
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

	h, err := mutex.New(s, "reindex").Lock(ctx) // blocks FIFO until granted
	if err != nil {
		log.Fatal(err)
	}
	// Do the work under h.Context(): it is canceled the moment the hold can no
	// longer be proven, before anyone else can get the mutex. Pass h.Token()
	// to storage that rejects stale writers.
	fmt.Println("holding", h.Resource(), "err:", h.Context().Err())

	_, err = mutex.New(s, "reindex").TryLock(ctx)
	fmt.Println("second TryLock:", err)

	if err := h.Release(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("after Release:", h.Err())
	// Output:
	// holding reindex err: <nil>
	// second TryLock: mutex: locked by another hold
	// after Release: session: hold released
}
