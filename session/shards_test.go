package session_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/election"
	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/mutex"
	"github.com/leasehold/leasehold/pool"
	"github.com/leasehold/leasehold/rwmutex"
	"github.com/leasehold/leasehold/semaphore"
	"github.com/leasehold/leasehold/session"
)

// The tests of a sharded namespace (Options.Shards), on one redis-server
// and on a Redis Cluster.

// shardKey is the key infix+name of resource name in its shard of ns.
func shardKey(ns string, n int, infix, name string) string {
	return scripts.ShardKeys(ns, scripts.ShardOf(name, n)).Prefix + infix + name
}

// TestShardsExclude: two sharded sessions never both hold a name, each
// name's keys are in the shard its hash picks, the names spread over the
// shards, a waiter is handed the mutex by notification in its shard, and
// every primitive works.
func TestShardsExclude(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	const n = 8
	testutil.InitShards(t, srv.Addr(), ns, n)
	o := session.Options{TTL: 2 * time.Second, Shards: n}
	s1, s2 := testutil.Dial(t, srv.Addr(), ns, o), testutil.Dial(t, srv.Addr(), ns, o)
	probe := testutil.Client(t, srv.Addr())
	ctx := testutil.Ctx(t, 30*time.Second)

	used := map[int]bool{}
	var holds []*session.Hold
	for i := range 32 {
		name := fmt.Sprintf("name-%d", i)
		h, err := mutex.New(s1, name).Lock(ctx)
		if err != nil {
			t.Fatalf("Lock %s: %v", name, err)
		}
		holds = append(holds, h)
		if _, err := mutex.New(s2, name).TryLock(ctx); !errors.Is(err, mutex.ErrLocked) {
			t.Fatalf("TryLock of held %s from another session = %v, want ErrLocked", name, err)
		}
		holder, err := testutil.MutexHolder(ctx, probe, shardKey(ns, n, "m:", name))
		if err != nil || holder != h.ID() {
			t.Fatalf("%s's shard key records holder %q (%v), want %q", name, holder, err, h.ID())
		}
		used[scripts.ShardOf(name, n)] = true
	}
	if len(used) < n/2 {
		t.Errorf("32 names used %d of %d shards", len(used), n)
	}
	if err := probe.Do(ctx, probe.B().Exists().Key("{"+ns+"}:m:name-0").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if n, _ := probe.Do(ctx, probe.B().Exists().Key("{"+ns+"}:m:name-0").Build()).AsInt64(); n != 0 {
		t.Errorf("the unsharded key of name-0 exists")
	}

	// A waiter of s2 is handed name-0 by notification when s1 releases.
	got := lockLater(ctx, t, s2, "name-0")
	testutil.WaitFor(t, ctx, func() bool {
		l, _ := probe.Do(ctx, probe.B().Llen().Key(shardKey(ns, n, "q:m:", "name-0")).Build()).AsInt64()
		return l == 1
	})
	for _, h := range holds {
		if err := h.Release(ctx); err != nil {
			t.Fatalf("Release: %v", err)
		}
	}
	if h := <-got; h == nil || h.Token() <= holds[0].Token() {
		t.Fatalf("hand-off = %v, want a hold with a token above %d", h, holds[0].Token())
	}

	// Every primitive, on names of several shards.
	sem := semaphore.New(s1, "sem", 2)
	p, err := sem.Acquire(ctx, 2)
	if err != nil {
		t.Fatalf("semaphore Acquire: %v", err)
	}
	if _, err := semaphore.New(s2, "sem", 2).TryAcquire(ctx, 1); !errors.Is(err, semaphore.ErrNoPermits) {
		t.Fatalf("TryAcquire over the limit = %v, want ErrNoPermits", err)
	}
	_ = p.Release(ctx)
	pl := pool.New(s1, "pool")
	if err := pl.Add(ctx, "a"); err != nil {
		t.Fatalf("pool Add: %v", err)
	}
	k, err := pl.Acquire(ctx)
	if err != nil {
		t.Fatalf("pool Acquire: %v", err)
	}
	if _, err := pool.New(s2, "pool").TryAcquire(ctx); !errors.Is(err, pool.ErrExhausted) {
		t.Fatalf("TryAcquire of an exhausted pool = %v, want ErrExhausted", err)
	}
	_ = k.Release(ctx)
	r1, err := rwmutex.New(s1, "rw").RLock(ctx)
	if err != nil {
		t.Fatalf("RLock: %v", err)
	}
	if _, err := rwmutex.New(s2, "rw").TryLock(ctx); err == nil {
		t.Fatal("TryLock of a read-held rwmutex succeeded")
	}
	_ = r1.Release(ctx)
	octx, ocancel := context.WithCancel(ctx)
	defer ocancel()
	seen := election.New(s2, "el").Observe(octx)
	l, err := election.New(s1, "el").Campaign(ctx, "one")
	if err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	waitLeader(t, seen, "one")
	_ = l.Release(ctx)
	if err := testutil.LockRounds(ctx, []*session.Session{s1, s2, s1, s2}, []string{"x", "x", "y", "y"}, 20); err != nil {
		t.Fatal(err)
	}
}

// TestShardsMismatch: a namespace's shard count is part of it. A session
// with another count, or unsharded, is refused with ErrShardsMismatch (and
// ErrInvalidOptions), as is a sharded session on an unsharded namespace in
// use, or where a shard's marker records another count; a refused open
// creates no guard.
func TestShardsMismatch(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	addr := srv.Addr()
	ctx := testutil.Ctx(t, 30*time.Second)
	probe := testutil.Client(t, addr)
	refused := func(t *testing.T, ns string, shards int) {
		t.Helper()
		s, err := session.Dial(ctx, testutil.ClientOption(addr), session.Options{Namespace: ns, TTL: time.Second, Shards: shards})
		if err == nil {
			_ = s.Close()
			t.Fatalf("a session of %d shards opened on %s", shards, ns)
		}
		if !errors.Is(err, session.ErrShardsMismatch) || !errors.Is(err, session.ErrInvalidOptions) {
			t.Fatalf("open with %d shards = %v, want ErrShardsMismatch and ErrInvalidOptions", shards, err)
		}
	}

	sharded := redistest.Namespace(t) + "-sharded"
	testutil.InitShards(t, addr, sharded, 8)
	s := testutil.Dial(t, addr, sharded, session.Options{TTL: time.Second, Shards: 8})
	if _, err := mutex.New(s, "a").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	refused(t, sharded, 4)
	refused(t, sharded, 16)
	refused(t, sharded, 1)
	if v, err := probe.Do(ctx, probe.B().Hget().Key("{"+sharded+"}:epoch").Field("shards").Build()).ToString(); err != nil || v != "8" {
		t.Fatalf("the guard records %q shards (%v), want 8", v, err)
	}
	marker, err := probe.Do(ctx, probe.B().Get().Key(scripts.ShardKeys(sharded, scripts.ShardOf("a", 8)).Epoch()).Build()).ToString()
	if err != nil || !strings.HasSuffix(marker, "|8") {
		t.Fatalf("the shard's epoch marker is %q (%v), want it to record 8 shards", marker, err)
	}

	// Marked intact ("0") and never opened: it may be sharded.
	intact := redistest.Namespace(t) + "-intact"
	testutil.InitEpoch(t, addr, intact)
	testutil.InitShards(t, addr, intact, 4)
	si, err := session.Dial(ctx, testutil.ClientOption(addr), session.Options{Namespace: intact, TTL: time.Second, Shards: 4})
	if err != nil {
		t.Fatalf("sharding a namespace marked intact: %v", err)
	}
	_ = si.Close()
	refused(t, intact, 1)

	plain := redistest.Namespace(t) + "-plain"
	testutil.Dial(t, addr, plain, session.Options{TTL: time.Second})
	refused(t, plain, 8)

	// No guard, and a shard's marker records 4 shards (the guard's master
	// lost its data): a session of 8 is refused and writes no guard.
	lost := redistest.Namespace(t) + "-lost"
	if err := probe.Do(ctx, probe.B().Set().Key(scripts.ShardKeys(lost, 3).Epoch()).Value("0|10000|4").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	refused(t, lost, 8)
	// A namespace of 16 shards whose shards 0-7 and guard were lost: one
	// of 8 shards reads past its own shards and is refused too.
	if err := probe.Do(ctx, probe.B().Set().Key(scripts.ShardKeys(lost, 3).Epoch()).Value("0|10000|16").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := probe.Do(ctx, probe.B().Rename().Key(scripts.ShardKeys(lost, 3).Epoch()).Newkey(scripts.ShardKeys(lost, 12).Epoch()).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	refused(t, lost, 8)
	// Nor does marking it intact for 8 shards (the test kit) lay it out.
	testutil.InitShards(t, addr, lost, 8)
	refused(t, lost, 8)
	if n, err := probe.Do(ctx, probe.B().Exists().Key("{"+lost+"}:epoch").Build()).AsInt64(); err != nil || n != 0 {
		t.Fatalf("a refused open, or the kit's marking, left a guard (%d, %v)", n, err)
	}
}

// TestShardCopyLoss: losing one shard's lease copy ends the holds of that
// shard with ErrLeaseLost, and only those: the session and the holds of
// other shards go on, the shard's next call opens a new copy with a new
// id, and a Lock waiting in that shard goes on waiting there.
func TestShardCopyLoss(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	const n = 4
	testutil.InitShards(t, srv.Addr(), ns, n)
	s := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: time.Second, Shards: n})
	probe := testutil.Client(t, srv.Addr())
	ctx := testutil.Ctx(t, 30*time.Second)
	a, b := "a", ""
	for i := 0; b == ""; i++ {
		if c := fmt.Sprint("b", i); scripts.ShardOf(c, n) != scripts.ShardOf(a, n) {
			b = c
		}
	}
	ha, err := mutex.New(s, a).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hb, err := mutex.New(s, b).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A Lock of s waits in a's shard for c, which s2 holds.
	c := ""
	for i := 0; c == ""; i++ {
		if x := fmt.Sprint("c", i); scripts.ShardOf(x, n) == scripts.ShardOf(a, n) {
			c = x
		}
	}
	s2 := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: time.Second, Shards: n})
	hc, err := mutex.New(s2, c).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waited := lockLater(ctx, t, s, c) // in the shard whose copy is lost below
	queue := scripts.ShardKeys(ns, scripts.ShardOf(c, n)).Queue(scripts.Mutex, c)
	testutil.WaitFor(t, ctx, func() bool {
		l, _ := probe.Do(ctx, probe.B().Llen().Key(queue).Build()).AsInt64()
		return l == 1
	})
	copyKey := scripts.ShardKeys(ns, scripts.ShardOf(a, n)).Lease(s.ID())
	if err := probe.Do(ctx, probe.B().Del().Key(copyKey).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ha.Done():
	case <-ctx.Done():
		t.Fatal("the hold of the lost copy's shard did not end")
	}
	if err := ha.Err(); !errors.Is(err, session.ErrLeaseLost) {
		t.Fatalf("hold of the lost shard ended with %v, want ErrLeaseLost", err)
	}
	if err := hb.Err(); err != nil {
		t.Fatalf("hold of another shard ended with %v", err)
	}
	if err := s.Err(); err != nil {
		t.Fatalf("session ended with %v", err)
	}
	h, err := mutex.New(s, a).Lock(ctx)
	if err != nil {
		t.Fatalf("Lock in the shard after its copy's loss: %v", err)
	}
	if want := s.ID() + "-1."; !strings.HasPrefix(h.ID(), want) {
		t.Errorf("hold id %q after the copy's loss, want prefix %q", h.ID(), want)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// The waiting Lock went on in the new copy: it gets c when s2 lets go.
	testutil.WaitFor(t, ctx, func() bool {
		ids, _ := probe.Do(ctx, probe.B().Lrange().Key(queue).Start(0).Stop(-1).Build()).AsStrSlice()
		return len(ids) > 0 && strings.HasPrefix(ids[len(ids)-1], s.ID()+"-1.")
	})
	if err := hc.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if hw := <-waited; hw == nil || !strings.HasPrefix(hw.ID(), s.ID()+"-1.") {
		t.Fatalf("the waiting Lock got %v, want a hold of the new copy", hw)
	} else if err := hw.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := hb.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for k := range n {
		keys, err := probe.Do(ctx, probe.B().Keys().Pattern(scripts.ShardKeys(ns, k).Prefix+"s:"+s.ID()+"*").Build()).AsStrSlice()
		if err != nil || len(keys) != 0 {
			t.Fatalf("lease copies left in shard %d after Close: %v %v", k, keys, err)
		}
	}
	if !errors.Is(s.Err(), session.ErrClosed) {
		t.Fatalf("Err after Close = %v, want ErrClosed", s.Err())
	}
}

// TestClusterShards: one sharded namespace spreads over every master of a
// cluster, and two sessions on it exclude each other and hand over.
func TestClusterShards(t *testing.T) {
	rc := redistest.StartCluster(t, redistest.ClusterOptions{})
	c := rc.Client(t)
	ctx := testutil.Ctx(t, 60*time.Second)
	ns := redistest.Namespace(t)
	const n = 16
	testutil.InitShardsOn(t, rueidis.ClientOption{InitAddress: rc.Seeds()}, ns, n)
	o := session.Options{Namespace: ns, TTL: 2 * time.Second, Shards: n}
	s1, s2 := openOn(t, c, o), openOn(t, c, o)
	masters := map[*redistest.Server]bool{}
	for i := range 32 {
		name := fmt.Sprint("n", i)
		h, err := mutex.New(s1, name).Lock(ctx)
		if err != nil {
			t.Fatalf("Lock %s: %v", name, err)
		}
		if _, err := mutex.New(s2, name).TryLock(ctx); !errors.Is(err, mutex.ErrLocked) {
			t.Fatalf("TryLock of held %s = %v, want ErrLocked", name, err)
		}
		masters[rc.MasterOf(t, redistest.Slot(shardKey(ns, n, "m:", name)))] = true
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if len(masters) != 3 {
		t.Errorf("32 names of a 16-shard namespace used %d masters, want 3", len(masters))
	}
	concurrentLocks(t, ctx, s1, s2)
}

// beatClient records the heartbeat scripts of each request: the lease
// keys they renew, per Do or DoMulti.
type beatClient struct {
	rueidis.Client
	sha  string
	mu   sync.Mutex
	reqs [][]string // per request with a heartbeat: the lease keys renewed, and "WAIT" for a WAIT
}

func (c *beatClient) record(cmds ...rueidis.Completed) {
	var keys []string
	for _, cmd := range cmds {
		if a := cmd.Commands(); len(a) > 3 && strings.EqualFold(a[0], "EVALSHA") && a[1] == c.sha {
			keys = append(keys, a[3])
		} else if a[0] == "WAIT" && len(keys) > 0 {
			keys = append(keys, "WAIT")
		}
	}
	if len(keys) > 0 {
		c.mu.Lock()
		c.reqs = append(c.reqs, keys)
		c.mu.Unlock()
	}
}

func (c *beatClient) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.record(cmd)
	return c.Client.Do(ctx, cmd)
}

func (c *beatClient) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	c.record(cmds...)
	return c.Client.DoMulti(ctx, cmds...)
}

// since returns the requests recorded from the i-th on.
func (c *beatClient) since(i int) [][]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.reqs[min(i, len(c.reqs)):])
}

// TestShardCopiesBeatTogether: the lease copies of a sharded session send
// their heartbeats as one request per tick, whenever each was opened; with
// ReplicaAck too, as one pipeline of their scripts and one WAIT.
func TestShardCopiesBeatTogether(t *testing.T) {
	t.Run("plain", func(t *testing.T) {
		srv := redistest.Start(t, redistest.Options{})
		beatsTogether(t, srv.Addr(), session.Options{})
	})
	t.Run("ReplicaAck", func(t *testing.T) {
		master, _ := redistest.StartReplicated(t)
		beatsTogether(t, master.Addr(), session.Options{ReplicaAck: 1})
	})
	t.Run("cluster ReplicaAck", clusterBeatsTogether)
}

// clusterBeatsTogether: on a cluster with ReplicaAck, the heartbeats of a
// session's 16 lease copies (5 or 6 per master) reach each master as one
// pipeline with one WAIT per tick: a master runs several heartbeat scripts
// per WAIT, where one pipeline per copy would run one.
func clusterBeatsTogether(t *testing.T) {
	rc := redistest.StartCluster(t, redistest.ClusterOptions{})
	c := rc.Client(t)
	ctx := testutil.Ctx(t, 60*time.Second)
	ns := redistest.Namespace(t)
	const n = 16
	testutil.InitShardsOn(t, rueidis.ClientOption{InitAddress: rc.Seeds()}, ns, n)
	s := openOn(t, c, session.Options{Namespace: ns, TTL: time.Second, Shards: n, ReplicaAck: 1})
	for i, held := 0, map[int]bool{}; len(held) < n; i++ { // a hold in every shard
		name := fmt.Sprint("n", i)
		if k := scripts.ShardOf(name, n); !held[k] {
			if _, err := mutex.New(s, name).Lock(ctx); err != nil {
				t.Fatalf("Lock %s: %v", name, err)
			}
			held[k] = true
		}
	}
	masters := rc.Masters(t)
	stats := func() map[*redistest.Server][2]int64 { // per master: WAIT calls, EVALSHA calls
		out := map[*redistest.Server][2]int64{}
		for _, m := range masters {
			info, err := rc.Do(t, m, "INFO", "commandstats").ToString()
			if err != nil {
				t.Fatal(err)
			}
			var v [2]int64
			for line := range strings.Lines(info) {
				for i, cmd := range []string{"cmdstat_wait:calls=", "cmdstat_evalsha:calls="} {
					if rest, ok := strings.CutPrefix(line, cmd); ok {
						fmt.Sscan(strings.SplitN(rest, ",", 2)[0], &v[i])
					}
				}
			}
			out[m] = v
		}
		return out
	}
	before := stats()
	time.Sleep(2 * time.Second) // six heartbeat ticks to count
	after := stats()
	for _, m := range masters {
		waits, scripts := after[m][0]-before[m][0], after[m][1]-before[m][1]
		t.Logf("master %s: %d heartbeat scripts, %d WAITs in 2 s", m.Addr(), scripts, waits)
		if waits == 0 || scripts < 2*waits {
			t.Errorf("master %s ran %d heartbeat scripts and %d WAITs in 2 s, want several scripts per WAIT", m.Addr(), scripts, waits)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
}

func beatsTogether(t *testing.T, addr string, o session.Options) {
	ns := redistest.Namespace(t)
	const n = 4
	testutil.InitShards(t, addr, ns, n)
	sum := sha1.Sum([]byte(scripts.Text("heartbeat.lua")))
	c := &beatClient{Client: testutil.Client(t, addr), sha: hex.EncodeToString(sum[:])}
	ctx := testutil.Ctx(t, 30*time.Second)
	o.Namespace, o.TTL, o.Shards = ns, time.Second, n
	s, err := session.New(ctx, c, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Three names in three shards, their copies opened 120 ms apart.
	var names []string
	seen := map[int]bool{}
	for i := 0; len(names) < 3; i++ {
		if name := fmt.Sprint("n", i); !seen[scripts.ShardOf(name, n)] {
			seen[scripts.ShardOf(name, n)] = true
			names = append(names, name)
		}
	}
	for i, name := range names {
		if i > 0 {
			time.Sleep(120 * time.Millisecond) // stagger the copies' opens
		}
		if _, err := mutex.New(s, name).TryLock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	c.mu.Lock()
	from := len(c.reqs)
	c.mu.Unlock()
	testutil.WaitFor(t, ctx, func() bool { return len(c.since(from)) >= 6 })
	// A tick is one request with the three copies' heartbeats. (A copy
	// whose timer fires later than the batch's window, on a loaded
	// machine, goes alone: so count on average, and one whole tick.)
	reqs, beats, whole := c.since(from), 0, false
	for _, keys := range reqs {
		if o.ReplicaAck > 0 && keys[len(keys)-1] != "WAIT" {
			t.Fatalf("a request with heartbeats and no WAIT at its end: %v", keys)
		}
		keys = slices.DeleteFunc(keys, func(k string) bool { return k == "WAIT" })
		beats += len(keys)
		whole = whole || len(keys) >= 3 // shard 0's copy (opened by Dial) may be a fourth
	}
	if beats < 2*len(reqs) || !whole {
		t.Fatalf("%d heartbeats in %d requests, want about 3 per request: %v", beats, len(reqs), reqs)
	}
}

// TestShardsGuardReasserted: a live sharded session puts the namespace's
// guard back within a heartbeat interval after it is lost, also over an
// unsharded marker written meanwhile, after which an unsharded session is
// refused.
func TestShardsGuardReasserted(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	s := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: time.Second, Shards: 4})
	if _, err := mutex.New(s, "a").Lock(testutil.Ctx(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	probe := testutil.Client(t, srv.Addr())
	ctx := testutil.Ctx(t, 20*time.Second)
	guard := "{" + ns + "}:epoch"
	isGuard := func() bool {
		v, err := probe.Do(ctx, probe.B().Hget().Key(guard).Field("shards").Build()).ToString()
		return err == nil && v == "4"
	}
	for _, lose := range []rueidis.Completed{
		probe.B().Del().Key(guard).Build(),
		probe.B().Set().Key(guard).Value("99999999999999|10000").Build(), // as an unsharded session's epoch_init
	} {
		if err := probe.Do(ctx, probe.B().Del().Key(guard).Build()).Error(); err != nil {
			t.Fatal(err)
		}
		if err := probe.Do(ctx, lose).Error(); err != nil {
			t.Fatal(err)
		}
		testutil.WaitFor(t, ctx, isGuard)
	}
	_, err := session.Dial(ctx, testutil.ClientOption(srv.Addr()), session.Options{Namespace: ns, TTL: time.Second})
	if !errors.Is(err, session.ErrShardsMismatch) {
		t.Fatalf("unsharded open after the guard's return = %v, want ErrShardsMismatch", err)
	}
}

// TestUnshardedRefusedInGuardGap: when a sharded namespace's guard is
// lost (its master lost its data) while its shards, on other masters,
// still hold, an unsharded session that opens before a live sharded
// session re-asserts the guard finds the shards' markers and is refused,
// even with a restart grace shorter than the sharded sessions' heartbeat
// interval, and writes nothing.
func TestUnshardedRefusedInGuardGap(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 20*time.Second)
	admin := testutil.Client(t, srv.Addr())
	opt := testutil.ClientOption(srv.Addr())
	// A sharded session that holds a name, then ends without a re-assert
	// that could win the race below: its shards' markers stay, as they do
	// on the masters that kept their data.
	g := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: 3 * time.Second, Shards: 4})
	if _, err := mutex.New(g, "a").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if err := admin.Do(ctx, admin.B().Del().Key("{"+ns+"}:epoch").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	before := testutil.Keys(t, ctx, admin)
	s, err := session.Dial(ctx, opt, session.Options{Namespace: ns, TTL: 100 * time.Millisecond, RestartGrace: 100 * time.Millisecond})
	if s != nil {
		_ = s.Close()
	}
	if !errors.Is(err, session.ErrShardsMismatch) || !errors.Is(err, session.ErrInvalidOptions) {
		t.Fatalf("unsharded Dial in the guard's gap = %v, want ErrShardsMismatch and ErrInvalidOptions", err)
	}
	if after := testutil.Keys(t, ctx, admin); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Fatalf("keys %v after the refused session, before %v", after, before)
	}
}

// TestShardsIntactMarkOutlivesLoss: a shard marked intact ("0",
// MarkIntactShards) that no session used survives a data loss that took
// the guard and every shard a session used. A session of another shard
// count, for which a name held in a lost shard lives in the surviving
// shard, must wait out the restart grace there, not grant at once while
// the old holder still believes it holds.
func TestShardsIntactMarkOutlivesLoss(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 20*time.Second)
	admin := testutil.Client(t, srv.Addr())
	const before, after = 4, 3
	// A name held in shard a of 4 that lives, with 3 shards, in a shard b
	// of both layouts that the 4-shard session never uses (not 0, which
	// Dial opens, not a): b keeps its "0".
	var name string
	for i := 0; name == ""; i++ {
		x := fmt.Sprint("name-", i)
		if ka, kb := scripts.ShardOf(x, before), scripts.ShardOf(x, after); ka != 0 && kb != 0 && ka != kb {
			name = x
		}
	}
	a := scripts.ShardOf(name, before)
	old := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: 30 * time.Second, Shards: before})
	h, err := mutex.New(old, name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The loss: the guard, shard 0 and shard a, as if their masters
	// restarted empty; the old session has not noticed yet (its next
	// heartbeat is 10 s away).
	lost := []string{"{" + ns + "}:epoch"}
	for _, k := range testutil.Keys(t, ctx, admin) {
		for _, sh := range []int{0, a} {
			if strings.HasPrefix(k, scripts.ShardKeys(ns, sh).Prefix) {
				lost = append(lost, k)
			}
		}
	}
	if err := admin.Do(ctx, admin.B().Del().Key(lost...).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	s, err := session.Dial(ctx, testutil.ClientOption(srv.Addr()),
		session.Options{Namespace: ns, TTL: 30 * time.Second, Shards: after})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h2, err := mutex.New(s, name).TryLock(ctx)
	if err == nil {
		t.Fatalf("%s granted in shard %d of %d at once while %s holds it (token %d): the intact mark outlived the loss",
			name, scripts.ShardOf(name, after), after, h.ID(), h2.Token())
	}
	if !errors.Is(err, session.ErrRestartGrace) {
		t.Fatalf("TryLock during the loss's grace = %v, want ErrRestartGrace", err)
	}
}

// TestSentinelShards: Shards 16 works through Sentinel too: exclusion and
// a hand-off by notification.
func TestSentinelShards(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	sentinel := redistest.StartSentinel(t, srv, "m")
	ns := redistest.Namespace(t)
	const n = 16
	testutil.InitShards(t, srv.Addr(), ns, n)
	ctx := testutil.Ctx(t, 30*time.Second)
	open := func() *session.Session {
		opt := testutil.ClientOption(sentinel)
		opt.Sentinel = rueidis.SentinelOption{MasterSet: "m"}
		s, err := session.Dial(ctx, opt, session.Options{Namespace: ns, TTL: 2 * time.Second, Shards: n})
		if err != nil {
			t.Fatalf("Dial through Sentinel: %v", err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	s1, s2 := open(), open()
	h, err := mutex.New(s1, "m").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *session.Hold, 1)
	go func() {
		h2, err := mutex.New(s2, "m").Lock(ctx)
		if err != nil {
			t.Errorf("waiting Lock: %v", err)
		}
		got <- h2
	}()
	probe := testutil.Client(t, srv.Addr())
	testutil.WaitFor(t, ctx, func() bool {
		l, _ := probe.Do(ctx, probe.B().Llen().Key(shardKey(ns, n, "q:m:", "m")).Build()).AsInt64()
		return l == 1
	})
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if h2 := <-got; h2 == nil || h2.Token() <= h.Token() {
		t.Fatalf("hand-off = %v", h2)
	}
	if err := testutil.LockRounds(ctx, []*session.Session{s1, s2, s1, s2}, []string{"x", "x", "y", "z"}, 20); err != nil {
		t.Fatal(err)
	}
}

// TestShardsInvalidName: an invalid name on a sharded session is refused
// as on any session, and opens no lease copy.
func TestShardsInvalidName(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	s := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: time.Second, Shards: 4})
	ctx := testutil.Ctx(t, 10*time.Second)
	probe := testutil.Client(t, srv.Addr())
	before := testutil.Keys(t, ctx, probe)
	for _, name := range testutil.InvalidNames() {
		_, err := mutex.New(s, name).TryLock(ctx)
		if !errors.Is(err, session.ErrInvalidName) || !strings.HasPrefix(err.Error(), "mutex: ") {
			t.Fatalf("TryLock(%q) = %v, want a mutex error matching ErrInvalidName", name, err)
		}
	}
	if after := testutil.Keys(t, ctx, probe); !slices.Equal(before, after) {
		t.Fatalf("invalid names changed Redis: %v -> %v", before, after)
	}
}

// namePerShard returns a name in each shard of n, in shard order.
func namePerShard(n int) []string {
	names := make([]string, n)
	for i, found := 0, 0; found < n; i++ {
		name := fmt.Sprint("name-", i)
		if k := scripts.ShardOf(name, n); names[k] == "" {
			names[k] = name
			found++
		}
	}
	return names
}

// lockLater starts a Lock of name on s, which may wait; its hold (nil
// when it failed, reported with t.Errorf) arrives on the channel.
func lockLater(ctx context.Context, t *testing.T, s *session.Session, name string) <-chan *session.Hold {
	got := make(chan *session.Hold, 1)
	go func() {
		h, err := mutex.New(s, name).Lock(ctx)
		if err != nil {
			t.Errorf("waiting Lock %s: %v", name, err)
		}
		got <- h
	}()
	return got
}

// pubsubConns returns how many connections of srv are subscribed to
// something (CLIENT LIST TYPE pubsub).
func pubsubConns(ctx context.Context, t *testing.T, probe rueidis.Client) int {
	t.Helper()
	list, err := probe.Do(ctx, probe.B().Arbitrary("CLIENT", "LIST").Args("TYPE", "pubsub").Build()).ToString()
	if err != nil {
		t.Fatalf("CLIENT LIST TYPE pubsub: %v", err)
	}
	n := 0
	for line := range strings.Lines(list) {
		if strings.TrimSpace(line) != "" {
			n++
		}
	}
	return n
}

// TestShardsOneNotificationConnection: a sharded session waits in many
// shards over one notification connection, as an unsharded session does;
// when that connection is killed, its waiters subscribe again, all on one
// new connection, and are handed their names by notification (long before
// their fallback re-check, which a holder's 20 s lease puts 20 s away).
func TestShardsOneNotificationConnection(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	const n = 8
	testutil.InitShards(t, srv.Addr(), ns, n)
	o := session.Options{TTL: 20 * time.Second, Shards: n}
	holder, waiter := testutil.Dial(t, srv.Addr(), ns, o), testutil.Dial(t, srv.Addr(), ns, o)
	probe := testutil.Client(t, srv.Addr())
	ctx := testutil.Ctx(t, 60*time.Second)
	names := namePerShard(n)
	holds := make([]*session.Hold, n)
	for k, name := range names {
		h, err := mutex.New(holder, name).Lock(ctx)
		if err != nil {
			t.Fatalf("Lock %s: %v", name, err)
		}
		holds[k] = h
	}
	got := make([]<-chan *session.Hold, n)
	for k, name := range names {
		got[k] = lockLater(ctx, t, waiter, name)
	}
	// The waiter's copies' channels (a copy subscribes before it queues).
	chans := make([]string, n)
	for k := range n {
		chans[k] = scripts.ShardKeys(ns, k).Channel(scripts.CopyID(waiter.ID(), 0))
	}
	subscribed := func() bool {
		counts, err := probe.Do(ctx, probe.B().PubsubNumsub().Channel(chans...).Build()).ToArray()
		if err != nil {
			t.Fatalf("PUBSUB NUMSUB: %v", err)
		}
		for i := 1; i < len(counts); i += 2 {
			if c, _ := counts[i].AsInt64(); c != 1 {
				return false
			}
		}
		return true
	}
	testutil.WaitFor(t, ctx, subscribed)
	if c := pubsubConns(ctx, t, probe); c != 2 {
		t.Fatalf("%d notification connections for 2 sessions using %d shards each, want 2", c, n)
	}
	if err := probe.Do(ctx, probe.B().Arbitrary("CLIENT", "KILL").Args("TYPE", "pubsub").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, ctx, subscribed) // the waiters re-check and subscribe again
	if c := pubsubConns(ctx, t, probe); c != 1 {
		t.Fatalf("%d notification connections after the kill, want 1: the waiter's (the holder waits for nothing)", c)
	}
	start := time.Now()
	for _, h := range holds {
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range got {
		h := <-c
		if h == nil {
			t.FailNow()
		}
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d > o.TTL/2 {
		t.Fatalf("hand-offs took %v: by the fallback re-check, not by notification", d)
	}
}

// TestShardCopyRetired: a lease copy that has held, waited for and watched
// nothing for 10 heartbeat intervals is closed, its lease deleted, while
// the copies with a hold, a waiting Lock or an election observer stay; the
// shard's next call opens a new copy.
func TestShardCopyRetired(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	const n = 4
	testutil.InitShards(t, srv.Addr(), ns, n)
	o := session.Options{TTL: time.Second, Shards: n}
	s, other := testutil.Dial(t, srv.Addr(), ns, o), testutil.Dial(t, srv.Addr(), ns, o)
	probe := testutil.Client(t, srv.Addr())
	ctx := testutil.Ctx(t, 60*time.Second)
	names := namePerShard(n) // idle, held, watched, waited for
	idle, held, watched, waited := names[0], names[1], names[2], names[3]
	lease := func(name string, gen int) string {
		return scripts.ShardKeys(ns, scripts.ShardOf(name, n)).Lease(scripts.CopyID(s.ID(), gen))
	}
	exists := func(key string) bool {
		c, err := probe.Do(ctx, probe.B().Exists().Key(key).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return c == 1
	}

	h, err := mutex.New(s, idle).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	hold, err := mutex.New(s, held).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	octx, ocancel := context.WithCancel(ctx)
	defer ocancel()
	seen := election.New(s, watched).Observe(octx)
	l, err := election.New(other, watched).Campaign(ctx, "v")
	if err != nil {
		t.Fatal(err)
	}
	waitLeader(t, seen, "v")
	blocker, err := mutex.New(other, waited).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := lockLater(ctx, t, s, waited)
	for _, name := range names {
		testutil.WaitFor(t, ctx, func() bool { return exists(lease(name, 0)) })
	}

	testutil.WaitFor(t, ctx, func() bool { return !exists(lease(idle, 0)) })
	for _, name := range []string{held, watched, waited} {
		if !exists(lease(name, 0)) {
			t.Fatalf("the copy of %s's shard was closed with the idle one", name)
		}
	}
	h, err = mutex.New(s, idle).Lock(ctx)
	if err != nil {
		t.Fatalf("Lock in the retired copy's shard: %v", err)
	}
	if want := scripts.CopyID(s.ID(), 1) + "."; !strings.HasPrefix(h.ID(), want) {
		t.Errorf("hold id %q after the copy was retired, want prefix %q", h.ID(), want)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := blocker.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if h := <-got; h == nil {
		t.FailNow()
	} else if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := hold.Err(); err != nil {
		t.Fatalf("the hold in another shard ended: %v", err)
	}
	_ = hold.Release(ctx)
	_ = l.Release(ctx)
	if err := s.Err(); err != nil {
		t.Fatalf("session ended with %v", err)
	}
}

// TestShardsShorterGraceRefused: a sharded session whose restart grace is
// shorter than the namespace's, or whose TTL is longer, is refused at Dial,
// as an unsharded one is, and leaves nothing in Redis.
func TestShardsShorterGraceRefused(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 20*time.Second)
	admin := testutil.Client(t, srv.Addr())
	testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: 3 * time.Second, Shards: 4}) // records the default grace, 10s
	before := testutil.Keys(t, ctx, admin)
	opt := testutil.ClientOption(srv.Addr())
	dialRefused(ctx, t, opt,
		session.Options{Namespace: ns, TTL: time.Second, RestartGrace: 2 * time.Second, Shards: 4},
		session.Options{Namespace: ns, TTL: 12 * time.Second, Shards: 4})
	if after := testutil.Keys(t, ctx, admin); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Fatalf("keys %v after refused sessions, before %v", after, before)
	}
	// The refusal names the namespace and the shard, not the shard's tag.
	_, err := session.Dial(ctx, opt, session.Options{Namespace: ns, TTL: time.Second, RestartGrace: 2 * time.Second, Shards: 4})
	if want := fmt.Sprintf("shard 0 of namespace %q", ns); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("refused Dial: %v, want it to name %s", err, want)
	}
	s, err := session.Dial(ctx, opt, session.Options{Namespace: ns, TTL: 300 * time.Millisecond, Shards: 4})
	if err != nil {
		t.Fatalf("a session that fits: %v", err)
	}
	_ = s.Close()
}
