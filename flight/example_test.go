package flight_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/flight"
	"github.com/leasehold/leasehold/leaseholdtest"
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
	// miniredis only: production code passes Dial just the address (see the
	// mutex package's example).
	opt := rueidis.ClientOption{InitAddress: []string{mr.Addr()}, ForceSingleClient: true, DisableCache: true}
	if err := leaseholdtest.MarkIntact(ctx, opt, ""); err != nil {
		log.Fatal(err)
	}
	s, err := session.Dial(ctx, opt, session.Options{TTL: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	g := flight.New(s, "reports", flight.Options{TTL: time.Minute})
	render := func(ctx context.Context) ([]byte, error) {
		fmt.Println("rendering") // once per TTL, whatever the number of callers and processes
		return []byte("report for 2026-11-25"), nil
	}
	for range 3 {
		v, err := g.Do(ctx, "daily:2026-11-25", render)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(string(v))
	}
	if err := g.Forget(ctx, "daily:2026-11-25"); err != nil {
		log.Fatal(err)
	}
	v, err := g.Do(ctx, "daily:2026-11-25", render)
	fmt.Println(string(v), err)
	// Output:
	// rendering
	// report for 2026-11-25
	// report for 2026-11-25
	// report for 2026-11-25
	// rendering
	// report for 2026-11-25 <nil>
}
