//go:build unix

package main

// End-to-end tests on a sharded namespace (session.Options.Shards): the
// commands find the shard count in Redis and work as on any namespace.

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/election"
	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/mutex"
	"github.com/leasehold/leasehold/pool"
	"github.com/leasehold/leasehold/semaphore"
	"github.com/leasehold/leasehold/session"
)

// shardedServer starts a Redis with namespace ns of n shards, every
// shard marked intact, and a session of it (which lays the namespace out:
// it writes the guard {ns}:epoch).
func shardedServer(t *testing.T, n int, o session.Options) (*redistest.Server, string, string, *session.Session) {
	t.Helper()
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	o.Shards = n
	s := testutil.Dial(t, srv.Addr(), ns, o) // InitShards, then Dial
	return srv, "redis://" + srv.Addr(), ns, s
}

// inShards returns count names that start with prefix, each in another
// shard of n.
func inShards(n, count int, prefix string) []string {
	var out []string
	used := map[int]bool{}
	for i := 0; len(out) < count; i++ {
		name := fmt.Sprint(prefix, i)
		if k := scripts.ShardOf(name, n); !used[k] {
			used[k] = true
			out = append(out, name)
		}
	}
	return out
}

// unusedShard returns a shard of n that none of names lives in.
func unusedShard(n int, names ...string) int {
	for k := range n {
		if !slices.ContainsFunc(names, func(name string) bool { return scripts.ShardOf(name, n) == k }) {
			return k
		}
	}
	panic("every shard used")
}

// TestShardsStatus: status shows a sharded namespace as one: its shard
// count, each session once with its holds in every shard (a lease copy
// that replaced a lost one included), each resource once in name order, a
// restart grace and a missing epoch marker with the shards they are in;
// text and JSON.
func TestShardsStatus(t *testing.T) {
	t.Parallel()
	const n = 8
	srv, url, ns, s1 := shardedServer(t, n, session.Options{Owner: "one"})
	s2 := testutil.Dial(t, srv.Addr(), ns, session.Options{Owner: "two", Shards: n})
	ctx := testutil.Ctx(t, 30*time.Second)
	probe := testutil.Client(t, srv.Addr())

	mutexes := inShards(n, 3, "m")
	slices.Sort(mutexes)
	var lost *session.Hold
	for i, name := range mutexes {
		h, err := mutex.New(s1, name).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			lost = h
		}
	}
	// The copy of mutexes[0]'s shard is lost: the next hold there is made
	// by a new copy, "<sid>-1".
	k0 := scripts.ShardOf(mutexes[0], n)
	if err := probe.Do(ctx, probe.B().Del().Key(scripts.ShardKeys(ns, k0).Lease(s1.ID())).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	<-lost.Done()
	again, err := mutex.New(s1, mutexes[0]).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(again.ID(), s1.ID()+"-1.") {
		t.Fatalf("hold %s after the copy's loss, want one of copy %s-1", again.ID(), s1.ID())
	}
	sem, err := semaphore.New(s2, "sem", 3).Acquire(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := pool.New(s2, "pool").Add(ctx, "a", "b"); err != nil {
		t.Fatal(err)
	}
	member, err := pool.New(s2, "pool").AcquireKey(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	leader, err := election.New(s1, "boss").Campaign(ctx, "v1")
	if err != nil {
		t.Fatal(err)
	}

	// A shard nothing used lost its marker; another is in a restart grace.
	used := append(slices.Clone(mutexes), "sem", "pool", "boss")
	missing := unusedShard(n, used...)
	graced := unusedShard(n, append(used, nameIn(missing, n))...)
	if err := probe.Do(ctx, probe.B().Del().Key(scripts.ShardKeys(ns, missing).Epoch()).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	now, err := probe.Do(ctx, probe.B().Time().Build()).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	sec, _ := strconv.ParseInt(now[0], 10, 64)
	marker := fmt.Sprintf("%d|10000|%d", sec*1000+60_000, n)
	if err := probe.Do(ctx, probe.B().Set().Key(scripts.ShardKeys(ns, graced).Epoch()).Value(marker).Build()).Error(); err != nil {
		t.Fatal(err)
	}

	stdout, stderr, code := cli(t, url, "status", "--json", "--namespace", ns)
	if code != 0 {
		t.Fatalf("status --json: exit %d: %s", code, stderr)
	}
	var st Status
	if err := json.Unmarshal([]byte(stdout), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, stdout)
	}
	if st.Namespace != ns || st.Shards != n {
		t.Errorf("namespace %q of %d shards, want %q of %d", st.Namespace, st.Shards, ns, n)
	}
	if !slices.Equal(st.EpochMissingShards, []int{missing}) || !st.EpochMissing {
		t.Errorf("epoch missing %v in shards %v, want shard %d", st.EpochMissing, st.EpochMissingShards, missing)
	}
	if g := st.RestartGrace; g == nil || !slices.Equal(g.Shards, []int{graced}) || g.LeftMs <= 50_000 || g.GraceMs != 10_000 {
		t.Errorf("restart grace %+v, want about 60s in shard %d", g, graced)
	}

	// One session each, with every hold, whatever its shard and copy.
	if len(st.Sessions) != 2 {
		t.Fatalf("sessions %+v, want 2", st.Sessions)
	}
	byID := map[string]SessionStatus{}
	for _, ss := range st.Sessions {
		byID[ss.ID] = ss
	}
	one, two := byID[s1.ID()], byID[s2.ID()]
	var oneHolds []string
	for _, h := range one.Holds {
		oneHolds = append(oneHolds, h.Kind+" "+h.Name+" "+h.Session)
		if h.Session != s1.ID() || h.RemainingMs <= 0 || h.Owner != "one" {
			t.Errorf("hold %+v of session %s", h, s1.ID())
		}
	}
	wantOne := []string{"mutex " + mutexes[0] + " " + s1.ID(), "mutex " + mutexes[1] + " " + s1.ID(),
		"mutex " + mutexes[2] + " " + s1.ID(), "election boss " + s1.ID()}
	if one.Owner != "one" || !slices.Equal(oneHolds, wantOne) {
		t.Errorf("session one %+v: holds %q, want %q", one, oneHolds, wantOne)
	}
	wantShards := []int{}
	for _, name := range append(slices.Clone(mutexes), "boss") {
		if k := scripts.ShardOf(name, n); !slices.Contains(wantShards, k) {
			wantShards = append(wantShards, k)
		}
	}
	slices.Sort(wantShards)
	if !slices.Equal(one.Shards, wantShards) {
		t.Errorf("session one's copies are in shards %v, want %v", one.Shards, wantShards)
	}
	if two.Owner != "two" || len(two.Holds) != 2 || two.Holds[0].Kind != "semaphore" || two.Holds[0].Permits != 2 ||
		two.Holds[0].Token != sem.Token() || two.Holds[1].Kind != "pool" || two.Holds[1].Member != "b" || two.Holds[1].Token != member.Token() {
		t.Errorf("session two %+v", two)
	}

	// Each resource once, in name order.
	var got []string
	for _, m := range st.Mutexes {
		got = append(got, m.Name)
		if m.Holder == nil || m.Holder.Session != s1.ID() {
			t.Errorf("mutex %+v, want held by %s", m, s1.ID())
		}
	}
	if !slices.Equal(got, mutexes) {
		t.Errorf("mutexes %q, want %q", got, mutexes)
	}
	if m := st.Mutexes[0]; m.Holder == nil || m.Holder.Hold != again.ID() || m.Holder.Token != again.Token() {
		t.Errorf("mutex %s: holder %+v, want the new copy's hold %s", m.Name, m.Holder, again.ID())
	}
	if len(st.Semaphores) != 1 || st.Semaphores[0].InUse != 2 || st.Semaphores[0].Limit != 3 ||
		len(st.Pools) != 1 || !slices.Equal(st.Pools[0].Free, []string{"a"}) || len(st.Pools[0].Held) != 1 || st.Pools[0].Held[0].Session != s2.ID() ||
		len(st.Elections) != 1 || st.Elections[0].Leader == nil || st.Elections[0].Leader.Token != leader.Token() || st.Elections[0].Value != "v1" {
		t.Errorf("semaphores %+v, pools %+v, elections %+v", st.Semaphores, st.Pools, st.Elections)
	}

	stdout, stderr, code = cli(t, url, "status", "--namespace", ns)
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, stderr)
	}
	lines := strings.Split(stdout, "\n")
	if lines[0] != fmt.Sprintf("namespace %q (%d shards)", ns, n) ||
		!strings.HasPrefix(lines[1], fmt.Sprintf("in shard %d of %d: grants resume in ", graced, n)) ||
		lines[2] != fmt.Sprintf("no epoch marker in shard %d of %d (nothing used it yet, or Redis lost its data): "+
			"the next session to use it starts the restart grace there", missing, n) {
		t.Errorf("status header:\n%s", strings.Join(lines[:4], "\n"))
	}
	// Session one: its SESSIONS row, three mutexes, the election.
	if c := strings.Count(stdout, s1.ID()); c != 5 || strings.Contains(stdout, s1.ID()+"-1") {
		t.Errorf("session %s appears %d times, want 5, never as its copy's id:\n%s", s1.ID(), c, stdout)
	}
	if c := strings.Count(stdout, s2.ID()); c != 3 { // its row, the semaphore, the pool
		t.Errorf("session %s appears %d times, want 3:\n%s", s2.ID(), c, stdout)
	}

	// pool stats and jobs, on the shard of the name.
	stdout, stderr, code = cli(t, url, "pool", "stats", "--namespace", ns, "pool")
	if code != 0 || !strings.Contains(stdout, `pool "pool": 2 members, 1 held, 1 free, 0 waiting`) || !strings.Contains(stdout, s2.ID()) {
		t.Errorf("pool stats: exit %d: %s%s", code, stdout, stderr)
	}
}

// nameIn returns a name that lives in shard k of n.
func nameIn(k, n int) string {
	for i := 0; ; i++ {
		if name := fmt.Sprint("x", i); scripts.ShardOf(name, n) == k {
			return name
		}
	}
}

// TestShardsReset: reset NAME takes the resource in its shard, reset --all
// everything held in every shard; both name the namespace, not a shard.
func TestShardsReset(t *testing.T) {
	t.Parallel()
	const n = 8
	_, url, ns, s := shardedServer(t, n, session.Options{})
	ctx := testutil.Ctx(t, 30*time.Second)
	names := inShards(n, 4, "r")
	holds := make([]*session.Hold, len(names))
	for i, name := range names {
		h, err := mutex.New(s, name).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		holds[i] = h
	}
	semHold, err := semaphore.New(s, "sem", 2).Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	ended := func(h *session.Hold) bool {
		select {
		case <-h.Done():
			return errors.Is(h.Err(), session.ErrLost)
		case <-time.After(5 * time.Second):
			return false
		}
	}

	stdout, stderr, code := cli(t, url, "reset", "--namespace", ns, names[0])
	if code != exitError || !strings.Contains(stdout, fmt.Sprintf("would reset mutex %q: held by session %s", names[0], s.ID())) {
		t.Fatalf("reset without --yes: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	stdout, stderr, code = cli(t, url, "reset", "--namespace", ns, names[0], "--yes")
	if code != 0 || !strings.Contains(stdout, fmt.Sprintf("reset mutex %q: took it from session %s", names[0], s.ID())) {
		t.Fatalf("reset --yes: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if !ended(holds[0]) {
		t.Fatalf("the reset hold did not end with ErrLost: %v", holds[0].Err())
	}
	if holds[1].Err() != nil {
		t.Fatalf("a hold in another shard ended: %v", holds[1].Err())
	}
	_, stderr, code = cli(t, url, "reset", "--namespace", ns, "nosuch", "--yes")
	if code != exitError || !strings.Contains(stderr, fmt.Sprintf("nothing is called \"nosuch\" in namespace %q", ns)) {
		t.Errorf("reset of an unknown name: exit %d, %q", code, stderr)
	}

	stdout, stderr, code = cli(t, url, "reset", "--namespace", ns, "--all")
	if code != exitError || !strings.Contains(stderr, "force-release 3 mutexes, 1 semaphore") {
		t.Fatalf("reset --all without --yes: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	stdout, stderr, code = cli(t, url, "reset", "--namespace", ns, "--all", "--yes")
	if code != 0 {
		t.Fatalf("reset --all --yes: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	for i, name := range names[1:] {
		if !strings.Contains(stdout, fmt.Sprintf("reset mutex %q: took it", name)) || !ended(holds[i+1]) {
			t.Errorf("mutex %s not reset: %q (hold: %v)", name, stdout, holds[i+1].Err())
		}
	}
	if !ended(semHold) {
		t.Errorf("semaphore not reset: %q (hold: %v)", stdout, semHold.Err())
	}
	stdout, _, code = cli(t, url, "reset", "--namespace", ns, "--all", "--yes")
	if code != 0 || stdout != fmt.Sprintf("no mutex, read-write mutex, election leader, semaphore or pool of namespace %q is held; nothing to reset\n", ns) {
		t.Errorf("reset --all with nothing held: exit %d, %q", code, stdout)
	}
}

// TestShardsLock: lock, sem-limit and pool add work on a sharded
// namespace without --shards; a --shards that differs from the
// namespace's is a usage error; --shards lays out a new namespace.
func TestShardsLock(t *testing.T) {
	t.Parallel()
	const n = 8
	srv, url, ns, s := shardedServer(t, n, session.Options{})
	ctx := testutil.Ctx(t, 30*time.Second)
	h, err := mutex.New(s, "m").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, stderr, code := cli(t, url, "lock", "--namespace", ns, "--wait", "0", "m", "--", "true")
	if code != exitNotAcquired || !strings.Contains(stderr, `mutex "m" is held by another session (--wait 0)`) {
		t.Fatalf("lock --wait 0 of a held mutex: exit %d, want %d; stderr %q", code, exitNotAcquired, stderr)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := cli(t, url, "lock", "--namespace", ns, "--wait", "0", "m", "--", "sh", "-c", `echo "$LEASEHOLD_TOKEN $LEASEHOLD_SESSION"`)
	f := strings.Fields(stdout)
	if code != 0 || len(f) != 2 {
		t.Fatalf("lock of the free mutex: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if tok, _ := strconv.ParseInt(f[0], 10, 64); tok <= h.Token() {
		t.Errorf("token %s, want one above %d", f[0], h.Token())
	}
	if in, err := mutex.New(s, "m").Holder(ctx); err != nil || in.Token <= h.Token() {
		t.Errorf("the CLI's grant is not in m's shard: %+v, %v", in, err)
	}

	// The admin commands on a name go to its shard.
	if _, stderr, code := cli(t, url, "sem-limit", "--namespace", ns, "api", "4"); code != 0 {
		t.Fatalf("sem-limit: exit %d: %s", code, stderr)
	}
	if st, err := semaphore.New(s, "api", 9).Stats(ctx); err != nil || st.Limit != 4 {
		t.Errorf("the limit set by sem-limit: %+v, %v", st, err)
	}
	if _, stderr, code := cli(t, url, "pool", "add", "--namespace", ns, "p", "k1", "k2"); code != 0 {
		t.Fatalf("pool add: exit %d: %s", code, stderr)
	}
	if m, err := pool.New(s, "p").Members(ctx); err != nil || !slices.Equal(m, []string{"k1", "k2"}) {
		t.Errorf("pool p's members %q (%v), want k1 k2", m, err)
	}
	if stdout, stderr, code := cli(t, url, "pool", "ls", "--namespace", ns, "p"); code != 0 || stdout != "k1\nk2\n" {
		t.Errorf("pool ls: exit %d, %q %q", code, stdout, stderr)
	}

	for _, args := range [][]string{
		{"lock", "--shards", "4", "m", "--", "true"},
		{"--shards", "1", "lock", "m", "--", "true"},
		{"status", "--shards", "4"},
		{"status", "--shards", "1"},
	} {
		_, stderr, code := cli(t, url, append([]string{"--namespace", ns}, args...)...)
		if code != exitUsage || !strings.Contains(stderr, "--shards") {
			t.Errorf("%q on %d shards: exit %d, want %d; stderr %q", args, n, code, exitUsage, stderr)
		}
	}
	if stdout, stderr, code := cli(t, url, "status", "--shards", strconv.Itoa(n), "--namespace", ns); code != 0 ||
		!strings.HasPrefix(stdout, fmt.Sprintf("namespace %q (%d shards)\n", ns, n)) {
		t.Errorf("status --shards %d: exit %d: %s%s", n, code, stdout, stderr)
	}

	// A new namespace: --shards lays it out, and the next commands find it.
	fresh := ns + "-fresh"
	testutil.InitShards(t, srv.Addr(), fresh, 4)
	if _, stderr, code := cli(t, url, "lock", "--namespace", fresh, "--shards", "4", "m", "--", "true"); code != 0 {
		t.Fatalf("lock --shards 4 on a new namespace: exit %d: %s", code, stderr)
	}
	if stdout, stderr, code := cli(t, url, "status", "--namespace", fresh); code != 0 ||
		!strings.HasPrefix(stdout, fmt.Sprintf("namespace %q (4 shards)\n", fresh)) {
		t.Errorf("status after lock --shards 4: exit %d: %s%s", code, stdout, stderr)
	}
	if _, stderr, code := cli(t, url, "lock", "--namespace", fresh, "m", "--", "true"); code != 0 {
		t.Errorf("lock without --shards on the namespace of 4: exit %d: %s", code, stderr)
	}
	// An unsharded namespace stays so.
	plain := ns + "-plain"
	testutil.InitEpoch(t, srv.Addr(), plain)
	if _, stderr, code := cli(t, url, "lock", "--namespace", plain, "m", "--", "true"); code != 0 {
		t.Fatalf("lock on a new namespace: exit %d: %s", code, stderr)
	}
	if stdout, _, code := cli(t, url, "status", "--json", "--namespace", plain); code != 0 || strings.Contains(stdout, `"shards"`) {
		t.Errorf("status --json of an unsharded namespace: exit %d:\n%s", code, stdout)
	}
	if _, stderr, code := cli(t, url, "status", "--shards", "2", "--namespace", plain); code != exitUsage ||
		!strings.Contains(stderr, fmt.Sprintf("--shards 2: namespace %q is unsharded", plain)) {
		t.Errorf("status --shards 2 of an unsharded namespace: exit %d: %s", code, stderr)
	}
}

// TestShardsCron: cron runs on a sharded namespace, and jobs lists its
// runs (the job's keys are in the shard of its mutex).
func TestShardsCron(t *testing.T) {
	t.Parallel()
	const n = 8
	_, url, ns, s := shardedServer(t, n, session.Options{})
	_, stderr, code := cli(t, url, "cron", "--namespace", ns, "--ttl", "2s", "--runs", "1", "j", "--schedule", "@every 1s", "--", "true")
	if code != 0 {
		t.Fatalf("cron --runs 1: exit %d: %s", code, stderr)
	}
	out, stderr, code := cli(t, url, "jobs", "--namespace", ns, "--json")
	var jobs []JobStatus
	if code != 0 || json.Unmarshal([]byte(out), &jobs) != nil {
		t.Fatalf("jobs --json: exit %d: %s%s", code, out, stderr)
	}
	if len(jobs) != 1 || jobs[0].Name != "j" || len(jobs[0].Runs) != 1 || jobs[0].Runs[0].Err != "" || jobs[0].Runs[0].Session == "" {
		t.Fatalf("jobs --json = %s, want job j with one run", out)
	}
	if out, _, code := cli(t, url, "jobs", "--namespace", ns, "j"); code != 0 || !strings.Contains(out, `job j  "@every 1s"`) {
		t.Errorf("jobs j: exit %d: %s", code, out)
	}
	// The job's record is where the library reads it.
	ctx := testutil.Ctx(t, 10*time.Second)
	e := scripts.ShardKeys(ns, scripts.ShardOf(scripts.JobMutex("j"), n))
	c := s.Client()
	if v, err := c.Do(ctx, c.B().Exists().Key(e.Job("j")).Build()).AsInt64(); err != nil || v != 1 {
		t.Errorf("job record %s: exists %d (%v)", e.Job("j"), v, err)
	}
}

// TestShardsText: shard lists read as ranges.
func TestShardsText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ks   []int
		want string
	}{
		{[]int{3}, "shard 3"},
		{[]int{1, 2}, "shards 1-2"},
		{[]int{0, 2, 3, 4, 5, 9}, "shards 0, 2-5, 9"},
		{[]int{0, 7}, "shards 0, 7"},
	} {
		if got := shardsText(tc.ks); got != tc.want {
			t.Errorf("shardsText(%v) = %q, want %q", tc.ks, got, tc.want)
		}
	}
}

// TestCopySession: in a sharded namespace a replacement lease copy
// "<sid>-<g>" is its session's; elsewhere an id is what it says.
func TestCopySession(t *testing.T) {
	t.Parallel()
	sharded, plain := scripts.Env{Shards: 8}, scripts.Env{}
	for _, tc := range []struct {
		lease, want string
	}{
		{"00c0ffee00c0ffee", "00c0ffee00c0ffee"},
		{"00c0ffee00c0ffee-1", "00c0ffee00c0ffee"},
		{"00c0ffee00c0ffee-12", "00c0ffee00c0ffee"},
		{"a-b-2", "a-b"},
		{"abc-0", "abc-0"},
		{"abc-01", "abc-01"},
		{"abc-x", "abc-x"},
		{"-1", "-1"},
	} {
		if got := copySession(sharded, tc.lease); got != tc.want {
			t.Errorf("sharded: copySession(%q) = %q, want %q", tc.lease, got, tc.want)
		}
		if got := copySession(plain, tc.lease); got != tc.lease {
			t.Errorf("unsharded: copySession(%q) = %q, want it unchanged", tc.lease, got)
		}
	}
	if got := sessionOf(sharded, "00c0ffee00c0ffee-3.1z"); got != "00c0ffee00c0ffee" {
		t.Errorf("sessionOf a replacement copy's hold = %q", got)
	}
}

// TestPrintStatusShardedCluster: a sharded namespace on a cluster names its
// shard count, its guard's slot and master, and the shards of each master.
func TestPrintStatusShardedCluster(t *testing.T) {
	t.Parallel()
	st := &Status{Namespace: "ns", Shards: 4, Cluster: &ClusterStatus{Slot: 100, Master: "10.0.0.1:7000",
		Masters:    []string{"10.0.0.1:7000", "10.0.0.2:7000"},
		ShardSlots: []ShardSlot{{0, 5, "10.0.0.2:7000"}, {1, 6, "10.0.0.1:7000"}, {2, 7, "10.0.0.2:7000"}, {3, 8, ""}}}}
	var b strings.Builder
	printStatus(&b, st)
	want := `namespace "ns" (4 shards)
Redis Cluster: guard in slot 100, served by master 10.0.0.1:7000; 2 masters scanned: 10.0.0.1:7000, 10.0.0.2:7000
shard 3 served by no master (cluster down?)
shard 1 on master 10.0.0.1:7000
shards 0, 2 on master 10.0.0.2:7000

`
	if got := b.String(); !strings.HasPrefix(got, want) {
		t.Errorf("got\n%s\nwant it to start with\n%s", got, want)
	}
	j, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range []string{`"namespace":"ns","shards":4,`, `"shard_slots":[{"shard":0,"slot":5,"master":"10.0.0.2:7000"},`} {
		if !strings.Contains(string(j), part) {
			t.Errorf("JSON %s lacks %s", j, part)
		}
	}
}

// TestClusterShardsCLI: on a Redis Cluster, status shows a namespace of 16
// shards as one, with the master of each shard; lock --wait 0 is refused
// on a held mutex; reset takes it, and its holder hears so at once
// (PUBLISH, as the sessions of a sharded namespace subscribe also on a
// cluster); lock then gets it.
func TestClusterShardsCLI(t *testing.T) {
	t.Parallel()
	rc := redistest.StartCluster(t, redistest.ClusterOptions{})
	c := rc.Client(t)
	ctx := testutil.Ctx(t, 60*time.Second)
	ns := redistest.Namespace(t)
	const n = 16
	testutil.InitShardsOn(t, rueidis.ClientOption{InitAddress: rc.Seeds()}, ns, n)
	// A TTL of 30s: the heartbeat (every 10s) cannot be what ends the
	// reset hold within 5s.
	s, err := session.New(ctx, c, session.Options{Namespace: ns, TTL: 30 * time.Second, Shards: n})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	names := inShards(n, 6, "c")
	slices.Sort(names)
	holds := make([]*session.Hold, len(names))
	for i, name := range names {
		if holds[i], err = mutex.New(s, name).Lock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	url := "redis://" + strings.Join(rc.Seeds(), ",")

	stdout, stderr, code := cli(t, url, "status", "--json", "--namespace", ns)
	var st Status
	if code != 0 || json.Unmarshal([]byte(stdout), &st) != nil {
		t.Fatalf("status --json: exit %d: %s%s", code, stdout, stderr)
	}
	cs := st.Cluster
	if st.Shards != n || cs == nil || len(cs.ShardSlots) != n || len(cs.Masters) != 3 ||
		cs.Slot != int64(redistest.Slot(scripts.NewKeys(ns).Prefix)) {
		t.Fatalf("status: shards %d, cluster %+v", st.Shards, cs)
	}
	masters := map[string]bool{}
	for k, sh := range cs.ShardSlots {
		slot := redistest.Slot(scripts.ShardKeys(ns, k).Prefix)
		if sh.Shard != k || sh.Slot != int64(slot) || sh.Master != rc.MasterOf(t, slot).Addr() {
			t.Errorf("shard %d: %+v, want slot %d on %s", k, sh, slot, rc.MasterOf(t, slot).Addr())
		}
		masters[sh.Master] = true
	}
	if len(masters) != 3 {
		t.Errorf("16 shards on %d masters, want 3", len(masters))
	}
	if len(st.Sessions) != 1 || st.Sessions[0].ID != s.ID() || len(st.Sessions[0].Holds) != len(names) || len(st.Mutexes) != len(names) {
		t.Errorf("sessions %+v, mutexes %+v: want one session holding %q", st.Sessions, st.Mutexes, names)
	}
	stdout, _, code = cli(t, url, "status", "--namespace", ns)
	if code != 0 || !strings.Contains(stdout, fmt.Sprintf("Redis Cluster: guard in slot %d, served by master %s; 3 masters scanned: ", cs.Slot, cs.Master)) ||
		strings.Count(stdout, " on master ") != 3 {
		t.Errorf("status: exit %d:\n%s", code, stdout)
	}

	_, stderr, code = cli(t, url, "lock", "--namespace", ns, "--restart-grace", "30s", "--wait", "0", names[0], "--", "true")
	if code != exitNotAcquired || !strings.Contains(stderr, "held by another session") {
		t.Errorf("lock --wait 0 of a held mutex: exit %d, stderr %q", code, stderr)
	}
	begin := time.Now()
	if stdout, stderr, code := cli(t, url, "reset", "--namespace", ns, names[0], "--yes"); code != 0 {
		t.Fatalf("reset: exit %d: %s%s", code, stdout, stderr)
	}
	select {
	case <-holds[0].Done():
		if !errors.Is(holds[0].Err(), session.ErrLost) {
			t.Errorf("the reset hold ended with %v", holds[0].Err())
		}
	case <-time.After(5 * time.Second):
		t.Errorf("the holder did not hear of the reset within %v", time.Since(begin).Round(time.Millisecond))
	}
	if _, stderr, code := cli(t, url, "lock", "--namespace", ns, "--restart-grace", "30s", "--wait", "0", names[0], "--", "true"); code != 0 {
		t.Errorf("lock of the reset mutex: exit %d: %s", code, stderr)
	}
}
