package scripts

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/internal/redistest"
)

// TestRWMutexHolderLastMillisecond: a holder's lease reads PTTL 0 in the
// millisecond before it expires, while it still exists. The read-write
// mutex once took that 0 for "free" and granted a newcomer beside the
// still-recorded live holder. Each trial lets a holder's lease run out
// while a newcomer tries in a tight loop, every try in one MULTI with an
// EXISTS of the holder's lease: a grant must never come while it exists.
func TestRWMutexHolderLastMillisecond(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true, ForceSingleClient: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	e := Env{C: c, K: NewKeys(ns), Grace: time.Hour}
	if err := c.Do(ctx, c.B().Set().Key(e.K.Epoch()).Value("0").Build()).Error(); err != nil { // intact
		t.Fatal(err)
	}
	if ok, _, err := e.OpenLease(ctx, "b", "test", time.Hour, 0); err != nil || !ok {
		t.Fatalf("OpenLease(b) = %v, %v", ok, err)
	}
	const trials = 20
	for i := range trials {
		holderShared := i%2 == 1 // a writer, then a reader, holds
		sid, name := fmt.Sprintf("a%d", i), fmt.Sprintf("rw%d", i)
		if ok, _, err := e.OpenLease(ctx, sid, "test", time.Hour, 0); err != nil || !ok {
			t.Fatalf("OpenLease(%s) = %v, %v", sid, ok, err)
		}
		held := Resource{Kind: RWMutex, Name: name, Shared: holderShared}
		if g, err := e.Acquire(ctx, held, HoldID(sid, 1), false); err != nil || g.Status != Granted {
			t.Fatalf("holder's Acquire = %+v, %v", g, err)
		}
		lease := e.K.Lease(sid)
		if err := c.Do(ctx, c.B().Pexpire().Key(lease).Milliseconds(20).Build()).Error(); err != nil {
			t.Fatal(err)
		}
		hid := HoldID("b", uint64(i+1))
		keys := append(e.rwKeys(name), e.K.Lease("b"))
		args := []string{hid, "0" + e.sharded() + "0"} // no queueing, a writer
		for {
			rs := c.DoMulti(ctx, c.B().Multi().Build(), rwAcquire.eval(c, keys, args),
				c.B().Exists().Key(lease).Build(), c.B().Exec().Build())
			v, err := rs[3].ToArray()
			if err != nil || len(v) != 2 {
				t.Fatalf("trial %d: EXEC = %v, %v", i, v, err)
			}
			reply, err := v[0].AsIntSlice()
			if err != nil {
				t.Fatalf("trial %d: acquire reply: %v", i, err)
			}
			exists, err := v[1].AsInt64()
			if err != nil {
				t.Fatal(err)
			}
			if reply[0] == replyGranted {
				if exists == 1 {
					t.Fatalf("trial %d: granted while the holder's lease still exists (holder shared=%v)", i, holderShared)
				}
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("trial %d: never granted after the holder's lease expired", i)
			}
		}
	}
}
