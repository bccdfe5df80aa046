// Package demo plays leasehold's scripted demo: simulated nodes, each its
// own session on its own connection, elect a leader and fail over, share a
// semaphore, split a pool of shards and live through Redis outages, while a
// checker records every hold and proves at the end that no two holders of
// one resource overlapped.
package demo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/election"
	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/pool"
	"github.com/leasehold/leasehold/semaphore"
	"github.com/leasehold/leasehold/session"
)

// Config configures Run.
type Config struct {
	Out io.Writer
	// Redis is the server to use; nil starts an embedded in-process
	// miniredis.
	Redis *rueidis.ClientOption
	// Where describes Redis in the opening lines ("redis://host:6379").
	Where string
	// Namespace to play in. Default: "demo" on the embedded server; on a
	// real one a fresh "leasehold-demo-<random>", whose keys are deleted at
	// the end.
	Namespace string
	// TTL of every lease. Default 1s.
	TTL time.Duration
}

const (
	electionName = "scheduler"
	semName      = "partner-api"
	semLimit     = 2
	poolName     = "shards"
)

// story is one run of the demo.
type story struct {
	cfg      Config
	ttl      time.Duration
	ns       string
	embedded bool
	opt      rueidis.ClientOption

	p   *printer
	chk *checker
	net *network

	ctx  context.Context // ends when the story is over: actors release and return
	stop context.CancelFunc
	wg   sync.WaitGroup

	mu      sync.Mutex
	nodes   []*node
	crashed map[string]bool
}

// node is one simulated process: its own client, link and sessions.
type node struct {
	name string
	link *link
	c    rueidis.Client
	m    *session.Manager
}

// Run plays the story and returns what the checker found. It returns an
// error if the story could not be played (Redis unreachable, a step that
// never happened); the summary's Overlaps says whether safety held.
func Run(ctx context.Context, cfg Config) (Summary, error) {
	st := &story{cfg: cfg, ttl: cfg.TTL, ns: cfg.Namespace, chk: newChecker(), crashed: map[string]bool{}}
	if st.ttl == 0 {
		st.ttl = time.Second
	}
	if cfg.Redis == nil {
		st.embedded = true
		mr := miniredis.NewMiniRedis()
		mr.ClockTTL(true) // server-side TTLs run on the wall clock, as in Redis
		if err := mr.Start(); err != nil {
			return Summary{}, fmt.Errorf("demo: start the embedded Redis: %w", err)
		}
		defer mr.Close()
		// ForceSingleClient: miniredis answers CLUSTER commands as a one-node
		// cluster, whose advertised address would bypass the demo's network.
		st.opt = rueidis.ClientOption{InitAddress: []string{mr.Addr()}, ForceSingleClient: true}
		if st.ns == "" {
			st.ns = "demo"
		}
	} else {
		st.opt = *cfg.Redis
		if st.ns == "" {
			var b [4]byte
			_, _ = rand.Read(b[:])
			st.ns = "leasehold-demo-" + hex.EncodeToString(b[:])
			defer st.cleanup()
		}
	}
	st.opt.DisableCache = true
	st.opt.ConnWriteTimeout = st.ttl / 2
	if st.embedded || cfg.Namespace == "" {
		if err := st.markIntact(ctx); err != nil {
			return Summary{}, err
		}
	}
	st.net = newNetwork(st.opt)
	st.p = &printer{w: cfg.Out, start: time.Now()}

	st.ctx, st.stop = context.WithCancel(ctx)
	defer st.stop()
	err := st.play(ctx)
	st.stop()
	st.wg.Wait()
	st.net.close()
	st.closeNodes()
	if err != nil {
		return st.chk.summary(), err
	}
	sum := st.chk.summary()
	st.printSummary(sum)
	return sum, nil
}

// play tells the story; actors run in goroutines until st.ctx ends.
func (st *story) play(ctx context.Context) error {
	where := "embedded (miniredis, in this process)"
	if !st.embedded {
		where = st.cfg.Where
	}
	st.p.line("leasehold demo")
	st.p.line("  Redis      %s, namespace %q", where, st.ns)
	st.p.line("  nodes      simulated; each is its own session on its own connection")
	st.p.line("  leases     TTL %v, renewed every %v", st.ttl, (st.ttl / 3).Round(time.Millisecond))
	st.p.line("  times      seconds since the start")

	steps := []func(context.Context) error{st.election, st.semaphore, st.shards, st.outages}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return err
		}
	}
	st.p.blank()
	st.p.line("The story is over: every node releases what it holds.")
	return nil
}

// newNode starts a simulated process.
func (st *story) newNode(name string) (*node, error) {
	l := st.net.link()
	opt := st.opt
	opt.DialCtxFn = l.dial
	c, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, fmt.Errorf("demo: %s: connect to Redis: %w", name, err)
	}
	o := session.Options{Namespace: st.ns, TTL: st.ttl, Owner: "demo/" + name}
	n := &node{name: name, link: l, c: c, m: session.NewManager(c, o)}
	st.mu.Lock()
	st.nodes = append(st.nodes, n)
	st.mu.Unlock()
	return n, nil
}

// markIntact marks the demo's namespace as holding all its data, before
// any node opens a session. Run calls it only for a brand-new namespace: the
// one on the embedded server, or the fresh one it names on a real server.
// No holder from before a data loss can be in either, and without the mark
// the first grant would wait out the restart grace (10s) for nothing. A
// namespace the user names is left to the grace, as in production.
func (st *story) markIntact(ctx context.Context) error {
	c, err := rueidis.NewClient(st.opt)
	if err != nil {
		return fmt.Errorf("demo: connect to Redis: %w", err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := scripts.MarkIntact(ctx, c, scripts.NewKeys(st.ns)); err != nil {
		return fmt.Errorf("demo: prepare namespace %q: %w", st.ns, err)
	}
	return nil
}

func (st *story) closeNodes() {
	st.mu.Lock()
	nodes := st.nodes
	st.nodes = nil
	st.mu.Unlock()
	for _, n := range nodes {
		_ = n.m.Close()
		n.c.Close()
	}
}

// cleanup deletes the keys of the demo's namespace on a real server.
func (st *story) cleanup() {
	opt := st.opt
	opt.DialCtxFn = st.cfg.Redis.DialCtxFn
	c, err := rueidis.NewClient(opt)
	if err != nil {
		return
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	k := scripts.NewKeys(st.ns)
	clients := []rueidis.Client{c}
	if c.Mode() == rueidis.ClientModeCluster {
		clients = clients[:0]
		for _, n := range c.Nodes() {
			clients = append(clients, n)
		}
	}
	pattern := k.All().Pattern()
	for _, cc := range clients {
		cursor := uint64(0)
		for {
			e, err := cc.Do(ctx, cc.B().Scan().Cursor(cursor).Match(pattern).Count(1000).Build()).AsScanEntry()
			if err != nil {
				break
			}
			if len(e.Elements) > 0 {
				_ = c.Do(ctx, c.B().Unlink().Key(e.Elements...).Build()).Error()
			}
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
}

// goActor runs f until it returns; Run waits for it.
func (st *story) goActor(f func()) { st.wg.Go(f) }

// byName returns the nodes with these names.
func (st *story) byName(names ...string) []*node {
	st.mu.Lock()
	defer st.mu.Unlock()
	var out []*node
	for _, name := range names {
		for _, n := range st.nodes {
			if n.name == name {
				out = append(out, n)
			}
		}
	}
	return out
}

func (st *story) isCrashed(name string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.crashed[name]
}

// sleep waits d unless ctx ends first.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// why says in a few words why a hold ended.
func why(cause error) string {
	switch {
	case errors.Is(cause, session.ErrLeaseLost):
		return "lease lost, no heartbeat confirmed in time"
	case errors.Is(cause, session.ErrLost):
		return "taken away"
	}
	return cause.Error()
}

// release releases h, bounded by the TTL.
func (st *story) release(h *session.Hold) {
	ctx, cancel := context.WithTimeout(context.Background(), st.ttl)
	defer cancel()
	_ = h.Release(ctx)
}

// ---- 1. Leader election with failover ----

func (st *story) election(ctx context.Context) error {
	st.p.section("1. Leader election with failover",
		fmt.Sprintf("Three nodes campaign for %q; the first leads, the others queue.", electionName))
	var nodes []*node
	for _, name := range []string{"node-a", "node-b", "node-c"} {
		n, err := st.newNode(name)
		if err != nil {
			return err
		}
		nodes = append(nodes, n)
	}
	st.goActor(func() { st.candidate(nodes[0]) })
	if err := st.waitLeader(ctx, func(r *rec) bool { return r.holder == "node-a" }, "node-a to lead"); err != nil {
		return err
	}
	for _, n := range nodes[1:] {
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
		st.p.event(n.name, "campaigns, waits its turn")
		st.goActor(func() { st.candidate(n) })
	}
	if err := sleep(ctx, 300*time.Millisecond); err != nil {
		return err
	}
	st.mu.Lock()
	st.crashed["node-a"] = true
	st.mu.Unlock()
	st.p.event("node-a", "is cut off from Redis: its heartbeats stop, as in a crash")
	nodes[0].link.cut(true)
	var next *rec
	if err := st.waitLeader(ctx, func(r *rec) bool { next = r; return r.holder != "node-a" }, "a new leader after node-a's crash"); err != nil {
		return err
	}
	st.chk.mu.Lock()
	var old *rec
	for _, r := range st.chk.recs {
		if r.res == electionName && r.holder == "node-a" {
			old = r
		}
	}
	gap := next.begin.Sub(old.last)
	st.chk.mu.Unlock()
	st.p.note("node-a's last moment as leader came %v before %s's first.", gap.Round(time.Millisecond), next.holder)
	return nil
}

// waitLeader waits until the election has an open hold that satisfies ok.
func (st *story) waitLeader(ctx context.Context, ok func(*rec) bool, what string) error {
	return st.chk.waitFor(ctx, 10*st.ttl, what, func() bool {
		for _, r := range st.chk.open(electionName) {
			if ok(r) {
				return true
			}
		}
		return false
	})
}

// candidate campaigns, leads until the leadership ends, and campaigns again
// (on a new session after a lease loss) until the story ends or its node
// crashed.
func (st *story) candidate(n *node) {
	for st.ctx.Err() == nil && !st.isCrashed(n.name) {
		s, err := n.m.Session(st.ctx)
		if err != nil {
			return
		}
		h, err := election.New(s, electionName).Campaign(st.ctx, n.name)
		if err != nil {
			_ = sleep(st.ctx, 50*time.Millisecond) // the session ended while waiting, or the story did
			continue
		}
		r := st.chk.begin(s, "election", electionName, n.name, h.Token(), 1, 0)
		st.p.event(n.name, "leads %q (term %d)", electionName, r.n)
		lost := r.hold(st.ctx, h, 0)
		if !lost {
			r.end(nil)
			st.release(h)
			return
		}
		r.end(lostCause(h))
		st.p.event(n.name, "stops leading: %s", why(lostCause(h)))
	}
}

// ---- 2. Bounded concurrency with a semaphore ----

func (st *story) semaphore(ctx context.Context) error {
	const workers, calls = 4, 2
	st.p.section(fmt.Sprintf("2. Bounded concurrency: semaphore %q, limit %d", semName, semLimit),
		fmt.Sprintf("%d workers make %d calls each to a partner API that allows %d at a time.", workers, calls, semLimit))
	var wg sync.WaitGroup
	for i := 1; i <= workers; i++ {
		n, err := st.newNode(fmt.Sprintf("worker-%d", i))
		if err != nil {
			return err
		}
		wg.Go(func() { st.semWorker(n, calls) })
		if err := sleep(ctx, 5*time.Millisecond); err != nil {
			break
		}
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return context.Cause(ctx)
	}
	st.p.note("At most %d calls ran at once (checker: %d).", semLimit, st.chk.summary().MaxInUse)
	return nil
}

func (st *story) semWorker(n *node, calls int) {
	for range calls {
		s, err := n.m.Session(st.ctx)
		if err != nil {
			return
		}
		sem := semaphore.New(s, semName, semLimit)
		start := time.Now()
		h, err := sem.Acquire(st.ctx, 1)
		if err != nil {
			return
		}
		r := st.chk.begin(s, "semaphore", semName, n.name, h.Token(), 1, semLimit)
		waited := ""
		if w := time.Since(start); w >= 20*time.Millisecond {
			waited = fmt.Sprintf("   (waited %.2fs)", w.Seconds())
		}
		st.p.event(n.name, "calls the partner API   in use %d of %d%s", st.chk.inUse(semName), semLimit, waited)
		lost := r.hold(st.ctx, h, 150*time.Millisecond)
		if lost {
			r.end(lostCause(h))
			st.p.event(n.name, "stops its call: %s", why(lostCause(h)))
			continue
		}
		r.end(nil)
		st.release(h)
	}
}

// ---- 3. Shard assignment from a pool ----

func (st *story) shards(ctx context.Context) error {
	st.p.section(fmt.Sprintf("3. Shard assignment: pool %q", poolName),
		"Three workers each claim a shard; then an operator removes a claimed one.")
	ops, err := st.newNode("ops")
	if err != nil {
		return err
	}
	s, err := ops.m.Session(ctx)
	if err != nil {
		return err
	}
	shards := pool.New(s, poolName)
	if err := shards.Add(ctx, "shard-0", "shard-1", "shard-2", "shard-3"); err != nil {
		return err
	}
	st.p.event("ops", "creates pool %q: shard-0, shard-1, shard-2, shard-3", poolName)
	workers := st.byName("worker-1", "worker-2", "worker-3")
	for _, n := range workers {
		st.goActor(func() { st.poolWorker(n) })
		if err := st.chk.waitFor(ctx, 5*st.ttl, n.name+" to claim a shard", func() bool {
			return st.holding(n.name, "pool") != nil
		}); err != nil {
			return err
		}
	}
	if err := sleep(ctx, 200*time.Millisecond); err != nil {
		return err
	}
	victim := workers[1].name
	st.chk.mu.Lock()
	key := strings.TrimPrefix(st.holding(victim, "pool").res, poolName+"/")
	st.chk.mu.Unlock()
	st.p.event("ops", "removes %s from the pool", key)
	if err := shards.Remove(ctx, key); err != nil {
		return err
	}
	return st.chk.waitFor(ctx, 5*st.ttl, victim+" to claim another shard", func() bool {
		r := st.holding(victim, "pool")
		return r != nil && r.res != poolName+"/"+key
	})
}

// holding returns an open hold of kind by holder. st.chk.mu held.
func (st *story) holding(holder, kind string) *rec {
	for _, r := range st.chk.recs {
		if r.holder == holder && r.kind == kind && !r.ended {
			return r
		}
	}
	return nil
}

// poolWorker claims a shard, works on it until it loses it, and claims
// another (on a new session after a lease loss) until the story ends.
func (st *story) poolWorker(n *node) {
	for st.ctx.Err() == nil {
		s, err := n.m.Session(st.ctx)
		if err != nil {
			return
		}
		h, err := pool.New(s, poolName).Acquire(st.ctx)
		if err != nil {
			_ = sleep(st.ctx, 50*time.Millisecond) // the session ended while waiting, or the story did
			continue
		}
		r := st.chk.begin(s, "pool", poolName+"/"+h.Resource(), n.name, h.Token(), 1, 0)
		st.p.event(n.name, "claims %s", h.Resource())
		lost := r.hold(st.ctx, h, 0)
		if !lost {
			r.end(nil)
			st.release(h)
			return
		}
		r.end(lostCause(h))
		reason := why(lostCause(h))
		if reason == "taken away" {
			reason = "taken away (removed from the pool)"
		}
		st.p.event(n.name, "loses %s: %s", h.Resource(), reason)
	}
}

// ---- 4. Redis outages ----

func (st *story) outages(ctx context.Context) error {
	st.p.section("4. Redis outage and return",
		"Redis becomes unreachable for every node: first briefly, then for longer than the TTL.")
	short := st.ttl / 5
	t0 := time.Now()
	st.chk.mu.Lock()
	held := 0
	for _, r := range st.chk.recs {
		if !r.ended {
			held++
		}
	}
	st.chk.mu.Unlock()
	st.p.event("redis", "unreachable for %v (less than the %v TTL)", short, st.ttl)
	st.net.setOutage(true)
	if err := sleep(ctx, short); err != nil {
		return err
	}
	st.net.setOutage(false)
	st.p.event("redis", "reachable again")
	if err := sleep(ctx, st.ttl); err != nil { // any loss would have happened by now
		return err
	}
	grants, losses := st.chk.since(t0)
	if grants == 0 && losses == 0 {
		st.p.note("%v later: all %d holds kept, none lost, nothing granted anew.", st.ttl, held)
	} else {
		st.p.note("%v later: %d holds lost, %d granted anew.", st.ttl, losses, grants)
	}

	long := 2*st.ttl + st.ttl/2
	st.p.event("redis", "unreachable for %v (longer than the TTL)", long)
	t1 := time.Now()
	st.net.setOutage(true)
	if err := sleep(ctx, long); err != nil {
		return err
	}
	st.net.setOutage(false)
	st.p.event("redis", "reachable again")
	_, losses = st.chk.since(t1)
	err := st.chk.waitFor(ctx, 10*st.ttl, "the work to resume after the outage", func() bool {
		return len(st.chk.open(electionName)) == 1 && st.openKind("pool") == 3
	})
	if err != nil {
		return err
	}
	st.p.note("%d holds ended during the outage; the work resumed on new sessions.", losses)
	return nil
}

// openKind counts the open holds of kind. st.chk.mu held.
func (st *story) openKind(kind string) int {
	n := 0
	for _, r := range st.chk.recs {
		if r.kind == kind && !r.ended {
			n++
		}
	}
	return n
}

// ---- output ----

func (st *story) printSummary(s Summary) {
	p := st.p
	p.blank()
	p.line("Summary, computed by a checker from what every node recorded:")
	p.line("  holds granted      %3d", s.Granted)
	p.line("  hand-offs          %3d   a leadership or shard went from one node to another", s.HandOffs)
	p.line("  holds lost         %3d   %d lease lost (Redis out of reach), %d taken away (shard removed)", s.Lost, s.LeaseLost, s.TakenAway)
	p.line("  semaphore in use   max %d of %d", s.MaxInUse, s.Limit)
	if s.TokenErrors == 0 {
		p.line("  fencing tokens     in order: each grant's token above the previous grant's")
	} else {
		p.line("  fencing tokens     %d OUT OF ORDER", s.TokenErrors)
	}
	p.line("  overlaps: %d        two holders of one resource at once, or a semaphore above its limit", s.Overlaps)
}

// printer writes the story's lines, each event stamped with the time since
// the start.
type printer struct {
	mu    sync.Mutex
	w     io.Writer
	start time.Time
}

func (p *printer) line(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, format+"\n", args...)
}

func (p *printer) blank() { p.line("") }

func (p *printer) section(title, intro string) {
	p.blank()
	p.line("%s", title)
	p.line("   %s", intro)
}

// event prints "  +1.234s  who       what".
func (p *printer) event(who, format string, args ...any) {
	at := fmt.Sprintf("+%.3fs", time.Since(p.start).Seconds())
	p.line("  %8s  %-9s %s", at, who, fmt.Sprintf(format, args...))
}

// note prints an indented remark under the events.
func (p *printer) note(format string, args ...any) {
	p.line("  %8s  %-9s %s", "", "", fmt.Sprintf(format, args...))
}
