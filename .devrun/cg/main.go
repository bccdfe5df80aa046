// Throwaway driver: n serial lock+release of one mutex on addr.
package main

import (
	"context"
	"flag"
	"log"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/mutex"
	"github.com/leasehold/leasehold/semaphore"
	"github.com/leasehold/leasehold/session"
)

func main() {
	addr := flag.String("addr", "", "")
	n := flag.Int("n", 1000, "")
	kind := flag.String("kind", "mutex", "")
	fresh := flag.Bool("fresh", false, "a fresh name per lock")
	flag.Parse()
	ctx := context.Background()
	opt := rueidis.ClientOption{InitAddress: []string{*addr}, DisableCache: true}
	if err := leaseholdtest.MarkIntact(ctx, opt, "cg"); err != nil {
		log.Fatal(err)
	}
	s, err := session.Dial(ctx, opt, session.Options{Namespace: "cg", TTL: 120 * time.Second, RestartGrace: 120 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	for i := range *n {
		name := "x"
		if *fresh {
			name = "x" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676%26))
		}
		var h *session.Hold
		switch *kind {
		case "mutex":
			h, err = mutex.New(s, name).Lock(ctx)
		case "semaphore":
			h, err = semaphore.New(s, name, 1).Acquire(ctx, 1)
		}
		if err != nil {
			log.Fatal(err)
		}
		if err := h.Release(ctx); err != nil {
			log.Fatal(err)
		}
	}
}
