package redistest

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

func TestSlotKnownValues(t *testing.T) {
	t.Parallel()
	for key, want := range map[string]int{
		"123456789":             0x31C3, // the CRC16/XMODEM check value
		"foo":                   12182,
		"bar":                   5061,
		"{user1000}.following":  Slot("user1000"),
		"{user1000}.followers":  Slot("user1000"),
		"foo{}{bar}":            Slot("foo{}{bar}"), // empty tag: whole key
		"foo{{bar}}zap":         Slot("{bar"),
		"foo{bar}{zap}":         Slot("bar"),
		"":                      0,
		"{}":                    Slot("{}"),
		"no closing { brace":    Slot("no closing { brace"),
		"x{a}" + "y{b}" + "z{}": Slot("a"),
	} {
		if got := Slot(key); got != want {
			t.Errorf("Slot(%q) = %d, want %d", key, got, want)
		}
	}
}

// clusterCtx bounds one client command.
func clusterCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// otherMaster returns a live master other than not.
func otherMaster(t *testing.T, c *Cluster, not *Server) *Server {
	t.Helper()
	for _, m := range c.Masters(t) {
		if m != not {
			return m
		}
	}
	t.Fatalf("no master other than %s", not.Addr())
	return nil
}

func role(t *testing.T, c *Cluster, s *Server) string {
	t.Helper()
	info, err := c.Do(t, s, "INFO", "replication").ToString()
	if err != nil {
		t.Fatalf("INFO replication on %s: %v", s.Addr(), err)
	}
	return infoField(info, "role")
}

// TestCluster runs the non-destructive checks on one shared cluster.
func TestCluster(t *testing.T) {
	t.Parallel()
	begin := time.Now()
	c := StartCluster(t, ClusterOptions{})
	t.Logf("StartCluster: %v", time.Since(begin))
	if n := len(c.Nodes()); n != 6 || len(c.Seeds()) != 6 {
		t.Fatalf("%d nodes, %d seeds, want 6", n, len(c.Seeds()))
	}
	seen := map[string]bool{}
	for _, s := range c.Nodes() {
		if c.ID(s) == "" || seen[c.ID(s)] {
			t.Fatalf("node %s has id %q", s.Addr(), c.ID(s))
		}
		seen[c.ID(s)] = true
	}

	t.Run("SlotMatchesKeyslot", func(t *testing.T) {
		node := c.Nodes()[0]
		for _, key := range []string{"", "a", "foo", "bar", "123456789", "{user1000}.following",
			"{user1000}.followers", "foo{}{bar}", "foo{{bar}}zap", "foo{bar}{zap}", "{}", "}{", "{a",
			"lease:{ns-1}:holder", "t-TestCluster-0123abcd", "\xff\x00\x80 binary"} {
			want, err := c.Do(t, node, "CLUSTER", "KEYSLOT", key).AsInt64()
			if err != nil {
				t.Fatalf("CLUSTER KEYSLOT %q: %v", key, err)
			}
			if got := Slot(key); got != int(want) {
				t.Errorf("Slot(%q) = %d, CLUSTER KEYSLOT = %d", key, got, want)
			}
		}
		for i := range 1000 {
			key := "k" + strconv.Itoa(i)
			want, err := c.Do(t, node, "CLUSTER", "KEYSLOT", key).AsInt64()
			if err != nil || Slot(key) != int(want) {
				t.Fatalf("Slot(%q) = %d, CLUSTER KEYSLOT = %d, %v", key, Slot(key), want, err)
			}
		}
	})

	t.Run("MastersAndReplicas", func(t *testing.T) {
		masters := c.Masters(t)
		if len(masters) != 3 {
			t.Fatalf("%d masters, want 3", len(masters))
		}
		replicas := map[*Server]bool{}
		for _, m := range masters {
			if r := role(t, c, m); r != "master" {
				t.Errorf("master %s has role %s", m.Addr(), r)
			}
			r := c.ReplicaOf(t, m)
			if replicas[r] || r == m {
				t.Fatalf("ReplicaOf(%s) = %s twice or itself", m.Addr(), r.Addr())
			}
			replicas[r] = true
			info, err := c.Do(t, r, "INFO", "replication").ToString()
			if err != nil || infoField(info, "role") != "slave" || infoField(info, "master_port") != strconv.Itoa(m.port) ||
				infoField(info, "master_link_status") != "up" {
				t.Fatalf("ReplicaOf(%s) = %s whose INFO replication is %q, %v", m.Addr(), r.Addr(), info, err)
			}
		}
	})

	t.Run("ClientWriteLandsOnMasterOf", func(t *testing.T) {
		cl := c.Client(t)
		ctx := clusterCtx(t)
		for _, key := range []string{"a", "foo", "{tag}x", "k-16383-ish"} {
			if err := cl.Do(ctx, cl.B().Set().Key(key).Value("v-"+key).Build()).Error(); err != nil {
				t.Fatalf("SET %s: %v", key, err)
			}
			m := c.MasterOf(t, Slot(key))
			if got, err := c.Do(t, m, "GET", key).ToString(); err != nil || got != "v-"+key {
				t.Fatalf("GET %s on MasterOf(%d) = %s: %q, %v", key, Slot(key), m.Addr(), got, err)
			}
			other := otherMaster(t, c, m)
			if err := c.Do(t, other, "GET", key).Error(); err == nil {
				t.Fatalf("GET %s on %s, not its master, did not fail", key, other.Addr())
			} else if ret, ok := rueidis.IsRedisErr(err); !ok {
				t.Fatalf("GET %s on %s: %v, want MOVED", key, other.Addr(), err)
			} else if addr, moved := ret.IsMoved(); !moved || addr != m.Addr() {
				t.Fatalf("GET %s on %s: %v, want MOVED to %s", key, other.Addr(), err, m.Addr())
			}
		}
	})

	t.Run("ScriptFlushAll", func(t *testing.T) {
		var shas []string
		for _, s := range c.Nodes() {
			sha, err := c.Do(t, s, "SCRIPT", "LOAD", "return 1").ToString()
			if err != nil {
				t.Fatalf("SCRIPT LOAD on %s: %v", s.Addr(), err)
			}
			shas = append(shas, sha)
		}
		c.ScriptFlushAll(t)
		for i, s := range c.Nodes() {
			ex, err := c.Do(t, s, "SCRIPT", "EXISTS", shas[i]).AsIntSlice()
			if err != nil || len(ex) != 1 || ex[0] != 0 {
				t.Fatalf("SCRIPT EXISTS on %s after ScriptFlushAll = %v, %v", s.Addr(), ex, err)
			}
		}
	})

	t.Run("MigrateSlotFast", func(t *testing.T) { testMigrate(t, c, "{mig-fast}", 300, 0) })
	t.Run("MigrateSlotWithPause", func(t *testing.T) { testMigrate(t, c, "{mig-slow}", 60, 3*time.Millisecond) })

	c.WaitHealthy(t)
}

// testMigrate fills the slot of tag with n keys, moves it to another master
// while a goroutine keeps overwriting those keys and creating new ones, and
// checks that every acknowledged write is on the new owner.
func testMigrate(t *testing.T, c *Cluster, tag string, n int, pause time.Duration) {
	cl := c.Client(t)
	slot := Slot(tag)
	from := c.MasterOf(t, slot)
	to := otherMaster(t, c, from)
	want := map[string]string{} // acknowledged value of every key
	for i := range n {
		key := fmt.Sprintf("%s:pre:%d", tag, i)
		if err := cl.Do(clusterCtx(t), cl.B().Set().Key(key).Value("p").Build()).Error(); err != nil {
			t.Fatalf("SET %s: %v", key, err)
		}
		want[key] = "p"
	}

	var (
		mu      sync.Mutex
		ops     int
		errs    []error
		stop    = make(chan struct{})
		writers sync.WaitGroup
	)
	writers.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			val := strconv.Itoa(i)
			keys := []string{fmt.Sprintf("%s:pre:%d", tag, i%n), fmt.Sprintf("%s:new:%d", tag, i)}
			for _, key := range keys {
				err := cl.Do(ctx, cl.B().Set().Key(key).Value(val).Build()).Error()
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Errorf("SET %s: %w", key, err))
				} else {
					want[key] = val
					ops++
				}
				mu.Unlock()
			}
			cancel()
		}
	})
	opsAt := func() int { mu.Lock(); defer mu.Unlock(); return ops }

	for opsAt() < 10 { // the writer is running before the migration starts
		time.Sleep(time.Millisecond)
	}
	begin, before := time.Now(), opsAt()
	c.MigrateSlot(t, slot, to, pause)
	during := opsAt() - before
	t.Logf("MigrateSlot of %d keys, pause %v: %v, %d writes meanwhile", n, pause, time.Since(begin), during)
	for after := opsAt(); opsAt() < after+20; { // and keeps writing once the slot moved
		time.Sleep(time.Millisecond)
	}
	close(stop)
	writers.Wait()

	for _, err := range errs {
		t.Errorf("writer: %v", err)
	}
	if got := c.MasterOf(t, slot); got != to {
		t.Fatalf("MasterOf(%d) = %s, want %s", slot, got.Addr(), to.Addr())
	}
	for key, val := range want {
		if got, err := c.Do(t, to, "GET", key).ToString(); err != nil || got != val {
			t.Fatalf("GET %s on %s = %q, %v; want %q", key, to.Addr(), got, err, val)
		}
	}
	if k, err := c.Do(t, to, "CLUSTER", "COUNTKEYSINSLOT", strconv.Itoa(slot)).AsInt64(); err != nil || int(k) != len(want) {
		t.Fatalf("COUNTKEYSINSLOT %d on %s = %d, %v; want %d", slot, to.Addr(), k, err, len(want))
	}
	if k, err := c.Do(t, from, "CLUSTER", "COUNTKEYSINSLOT", strconv.Itoa(slot)).AsInt64(); err != nil || k != 0 {
		t.Fatalf("COUNTKEYSINSLOT %d on old owner %s = %d, %v; want 0", slot, from.Addr(), k, err)
	}
}

func TestClusterManualFailover(t *testing.T) {
	t.Parallel()
	c := StartCluster(t, ClusterOptions{})
	cl := c.Client(t)
	const key = "failover-key"
	if err := cl.Do(clusterCtx(t), cl.B().Set().Key(key).Value("v1").Build()).Error(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	m := c.MasterOf(t, Slot(key))
	r := c.ReplicaOf(t, m)
	begin := time.Now()
	c.Failover(t, r)
	t.Logf("Failover: %v", time.Since(begin))

	if got := c.MasterOf(t, Slot(key)); got != r {
		t.Fatalf("MasterOf after Failover = %s, want the replica %s", got.Addr(), r.Addr())
	}
	if role(t, c, r) != "master" {
		t.Fatalf("promoted replica has role %s", role(t, c, r))
	}
	// The client still routes to the old master, which answers MOVED.
	if got, err := cl.Do(clusterCtx(t), cl.B().Get().Key(key).Build()).ToString(); err != nil || got != "v1" {
		t.Fatalf("GET after failover = %q, %v (a manual failover loses nothing)", got, err)
	}
	if err := cl.Do(clusterCtx(t), cl.B().Set().Key(key).Value("v2").Build()).Error(); err != nil {
		t.Fatalf("SET after failover: %v", err)
	}
	if got, err := c.Do(t, r, "GET", key).ToString(); err != nil || got != "v2" {
		t.Fatalf("GET on new master = %q, %v", got, err)
	}
	c.WaitHealthy(t) // the old master resyncs as the new master's replica
	if got := c.ReplicaOf(t, r); got != m {
		t.Fatalf("ReplicaOf(new master) = %s, want the old master %s", got.Addr(), m.Addr())
	}
	c.Failover(t, m) // and back
	if got := c.MasterOf(t, Slot(key)); got != m {
		t.Fatalf("MasterOf after failing back = %s, want %s", got.Addr(), m.Addr())
	}
}

func TestClusterKillMaster(t *testing.T) {
	t.Parallel()
	c := StartCluster(t, ClusterOptions{})
	cl := c.Client(t)
	const key = "kill-key"
	slot := Slot(key)
	m := c.MasterOf(t, slot)
	r := c.ReplicaOf(t, m)
	begin := time.Now()
	if got := c.KillMaster(t, m); got != r {
		t.Fatalf("KillMaster promoted %s, want the replica %s", got.Addr(), r.Addr())
	}
	t.Logf("KillMaster (NodeTimeout 2s): %v", time.Since(begin))
	if got := c.MasterOf(t, slot); got != r {
		t.Fatalf("MasterOf after KillMaster = %s, want %s", got.Addr(), r.Addr())
	}
	if role(t, c, r) != "master" {
		t.Fatalf("promoted replica has role %s", role(t, c, r))
	}
	// The client learns the new topology after an error on the dead node.
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := cl.Do(clusterCtx(t), cl.B().Set().Key(key).Value("v").Build()).Error()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("SET after failover: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got, err := c.Do(t, r, "GET", key).ToString(); err != nil || got != "v" {
		t.Fatalf("GET on new master = %q, %v", got, err)
	}

	// Restarted, the old master rejoins as the new master's replica.
	m.Restart()
	c.WaitHealthy(t)
	if got := c.ReplicaOf(t, r); got != m {
		t.Fatalf("ReplicaOf(new master) = %s, want the restarted old master %s", got.Addr(), m.Addr())
	}
}

func TestClusterRestartEmpty(t *testing.T) {
	t.Parallel()
	c := StartCluster(t, ClusterOptions{})
	cl := c.Client(t)
	const key = "restart-key"
	slot := Slot(key)
	if err := cl.Do(clusterCtx(t), cl.B().Set().Key(key).Value("v").Build()).Error(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	m := c.MasterOf(t, slot)
	r := c.ReplicaOf(t, m)
	epoch := func() string {
		info, err := c.Do(t, r, "CLUSTER", "INFO").ToString()
		if err != nil {
			t.Fatalf("CLUSTER INFO: %v", err)
		}
		return infoField(info, "cluster_current_epoch")
	}
	epochBefore := epoch()
	begin := time.Now()
	c.RestartEmpty(t, m)
	t.Logf("RestartEmpty: %v", time.Since(begin))

	if got := c.MasterOf(t, slot); got != m {
		t.Fatalf("MasterOf after RestartEmpty = %s, want %s", got.Addr(), m.Addr())
	}
	if got := c.ReplicaOf(t, m); got != r {
		t.Fatalf("ReplicaOf after RestartEmpty = %s, want %s", got.Addr(), r.Addr())
	}
	if e := epoch(); e != epochBefore {
		t.Fatalf("cluster_current_epoch %s -> %s: a failover happened", epochBefore, e)
	}
	for _, s := range []*Server{m, r} {
		if n, err := c.Do(t, s, "DBSIZE").AsInt64(); err != nil || n != 0 {
			t.Fatalf("DBSIZE on %s after RestartEmpty = %d, %v; want 0", s.Addr(), n, err)
		}
	}
	if err := cl.Do(clusterCtx(t), cl.B().Get().Key(key).Build()).Error(); !rueidis.IsRedisNil(err) {
		t.Fatalf("GET through the client after RestartEmpty: %v, want nil", err)
	}
	if err := cl.Do(clusterCtx(t), cl.B().Set().Key(key).Value("v2").Build()).Error(); err != nil {
		t.Fatalf("SET after RestartEmpty: %v", err)
	}
}
