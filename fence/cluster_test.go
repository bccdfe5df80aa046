package fence_test

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/testutil"
)

// On a Redis Cluster (3 masters, 3 replicas) both Redis keys of a fenced key
// live in one slot, on its master, and different fenced keys spread over
// the masters.
func TestCluster(t *testing.T) {
	rc := redistest.StartCluster(t, redistest.ClusterOptions{})
	c := rc.Client(t)
	name := redistest.Namespace(t)
	st := fence.New(c, name)
	ctx := testutil.Ctx(t, 30*time.Second)
	masters := map[string]bool{}
	for i := range 12 {
		key := "order:" + strconv.Itoa(i)
		if err := st.Set(ctx, key, []byte("v1"), 10); err != nil {
			t.Fatalf("Set(%s): %v", key, err)
		}
		if _, _, err := st.GetFenced(ctx, key, 11); err != nil {
			t.Fatalf("GetFenced(%s): %v", key, err)
		}
		if err := st.Set(ctx, key, []byte("stale"), 10); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("stale Set(%s): got %v, want ErrStale", key, err)
		}
		if err := st.Set(ctx, key, []byte("v2"), 12); err != nil {
			t.Fatalf("Set(%s): %v", key, err)
		}
		if v, tok := mustGet(t, st, key); v != "v2" || tok != 12 {
			t.Fatalf("Get(%s) = %q, %d; want v2, 12", key, v, tok)
		}
		mark, val := rawKeys(name, key)
		slot := redistest.Slot(mark)
		if redistest.Slot(val) != slot {
			t.Fatalf("%s: %s in slot %d, %s in slot %d", key, mark, slot, val, redistest.Slot(val))
		}
		m := rc.MasterOf(t, slot)
		masters[m.Addr()] = true
		if n, err := m.Do(t, "EXISTS", mark, val).AsInt64(); err != nil || n != 2 {
			t.Fatalf("%s: EXISTS on the master of slot %d = %d, %v; want 2", key, slot, n, err)
		}
		if err := st.Delete(ctx, key, 13); err != nil {
			t.Fatalf("Delete(%s): %v", key, err)
		}
		if err := st.Set(ctx, key, []byte("again"), 12); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("re-create of %s below the deleter: got %v, want ErrStale", key, err)
		}
		if n, err := m.Do(t, "EXISTS", mark, val).AsInt64(); err != nil || n != 1 {
			t.Fatalf("%s after Delete: EXISTS = %d, %v; want 1 (the mark)", key, n, err)
		}
	}
	if len(masters) < 2 {
		t.Fatalf("12 keys all on %v: fenced keys should spread over the masters", masters)
	}
}
