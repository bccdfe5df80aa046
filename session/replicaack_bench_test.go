package session_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/mutex"
	"github.com/leasehold/leasehold/session"
)

// BenchmarkLockReleaseReplicaAck measures what ReplicaAck costs a serial
// lock+release: a master and one replica on loopback, one session each
// with ReplicaAck 0 and 1 (WAIT in the same round trip as each grant and
// release). Run with go test -run '^$' -bench ReplicaAck ./session/.
func BenchmarkLockReleaseReplicaAck(b *testing.B) {
	master, _ := redistest.StartReplicated(b)
	ns := redistest.Namespace(b)
	ctx := testutil.Ctx(b, 10*time.Minute)
	for _, acks := range []int{0, 1} {
		s := testutil.Dial(b, master.Addr(), ns, session.Options{TTL: 10 * time.Second, ReplicaAck: acks})
		m := mutex.New(s, fmt.Sprint("m", acks))
		b.Run(fmt.Sprint("acks=", acks), func(b *testing.B) {
			for b.Loop() {
				h, err := m.Lock(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := h.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
