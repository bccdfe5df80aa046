package chaos

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/fence"
)

// The fenced store is a separate redis-server that no nemesis touches: the
// resource that holders protect with their locks, a fence.Store. Every
// operation carries the holder's fencing token: a read is GetFenced (so
// that a holder's read-modify-write cannot interleave with a newer
// holder's), a write is Set of the value read + 1. Holders log every
// operation, accepted or not, as an EvStore event once it has returned; the
// store keeps no log of its own, so the checker recovers the store's order
// from the values (see checker.store).
const storeName = "chaos"

// storeTimeout bounds one store operation. The store is never faulted, so
// it answers well within it even across a holder pause (at most a few
// seconds); an operation that fails anyway has an unknown outcome, which
// the checker reports.
const storeTimeout = 15 * time.Second

// storeRead reads key with token (0 for a key without a value).
func storeRead(ctx context.Context, st *fence.Store, key string, token int64) (value, writer int64, err error) {
	b, writer, err := st.GetFenced(ctx, key, token)
	if errors.Is(err, fence.ErrNotFound) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	value, err = strconv.ParseInt(string(b), 10, 64)
	return value, writer, err
}

// opsOf returns the store operations the holders logged.
func opsOf(evs []Event) []Op {
	var ops []Op
	for _, e := range evs {
		if e.Type == EvStore && e.Store != nil {
			ops = append(ops, *e.Store)
		}
	}
	return ops
}

// readFinal returns the value the store holds for each key of ops (0 for
// none), read once every holder has exited.
func readFinal(t testing.TB, addr string, ops []Op) map[string]int64 {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true, ForceSingleClient: true})
	if err != nil {
		t.Fatalf("chaos: store: %v", err)
	}
	defer c.Close()
	st := fence.New(c, storeName)
	final := map[string]int64{}
	for _, o := range ops {
		if _, ok := final[o.Key]; ok {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		b, _, err := st.Get(ctx, o.Key)
		cancel()
		switch {
		case errors.Is(err, fence.ErrNotFound):
			final[o.Key] = 0
		case err != nil:
			t.Fatalf("chaos: read the store's %s: %v", o.Key, err)
		default:
			if final[o.Key], err = strconv.ParseInt(string(b), 10, 64); err != nil {
				t.Fatalf("chaos: the store's %s holds %q: %v", o.Key, b, err)
			}
		}
	}
	return final
}

func (o Op) String() string {
	return fmt.Sprintf("%s by hold %s (token %d, value %d)", o.Op, o.Hold, o.Token, o.Value)
}
