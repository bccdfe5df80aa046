package schedule_test

import (
	"context"
	"fmt"
	"log"
	"slices"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/schedule"
	"github.com/leasehold/leasehold/session"
)

// The example runs on an in-process miniredis so that it is self-contained;
// point InitAddress at a real Redis in production. Every replica runs the
// same code; each slot runs on one of them.
func Example() {
	mr, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	// ForceSingleClient, DisableCache and MarkIntact are for this in-process
	// miniredis only (see the mutex package's example); production code
	// builds its client with DisableCache and a ConnWriteTimeout below the
	// TTL (see session.NewManager).
	opt := rueidis.ClientOption{InitAddress: []string{mr.Addr()}, ForceSingleClient: true, DisableCache: true}
	if err := leaseholdtest.MarkIntact(context.Background(), opt, ""); err != nil {
		log.Fatal(err)
	}
	c, err := rueidis.NewClient(opt)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	m := session.NewManager(c, session.Options{TTL: 5 * time.Second})
	defer m.Close()

	job, err := schedule.New(m, "report", "@every 1s", schedule.Options{})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan schedule.Run, 1)
	done := make(chan error, 1)
	go func() {
		done <- job.Run(ctx, func(ctx context.Context, r schedule.Run) error {
			// Work under ctx: it ends if the run's hold is lost. Pass
			// r.Token to storage that rejects stale writers.
			select {
			case ran <- r:
			default:
			}
			return nil
		})
	}()
	r := <-ran
	fmt.Println("slot on the second:", r.Slot.Equal(r.Slot.Truncate(time.Second)), "token:", r.Token > 0)
	stop()
	fmt.Println("Run:", <-done)

	hs, err := job.History(context.Background(), 10) // latest first
	if err != nil {
		log.Fatal(err)
	}
	i := slices.IndexFunc(hs, func(h schedule.Record) bool { return h.Token == r.Token })
	fmt.Println("recorded:", i >= 0 && hs[i].Slot.Equal(r.Slot) && hs[i].Err == "" && !hs[i].Lost)
	// Output:
	// slot on the second: true token: true
	// Run: context canceled
	// recorded: true
}
