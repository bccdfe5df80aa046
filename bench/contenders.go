package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"

	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/mutex"
	"github.com/leasehold/leasehold/pool"
	"github.com/leasehold/leasehold/rwmutex"
	"github.com/leasehold/leasehold/semaphore"
	"github.com/leasehold/leasehold/session"
)

// errBusy is what proc.TryLock returns when the lock is held elsewhere.
var errBusy = errors.New("busy")

// unlocker releases what a Lock or TryLock acquired.
type unlocker func(ctx context.Context) error

// proc is one contender as one process would use it: its own client(s).
// Lock blocks until acquired or ctx ends.
type proc interface {
	Lock(ctx context.Context, key string) (unlocker, error)
	TryLock(ctx context.Context, key string) (unlocker, error)
	counter() *counter
	Close() error
}

// procOpts tunes a proc for a scenario.
type procOpts struct {
	addr    string        // Redis address; "" for the main server
	ns      string        // key namespace / prefix, unique per run
	ttl     time.Duration // leasehold TTL; 0: the library default
	small   bool          // small client buffers (the 1,000-session scale run)
	latency bool          // record the latency of lease commands
	// waits: the scenario's Lock calls wait for other holders, and the
	// run ends them with their ctx (the contended scenario).
	waits bool
	// cluster: the seed addresses of a Redis Cluster, instead of addr.
	cluster []string
	// spread: the namespaces of a proc that spreads its names over several
	// sessions (the cluster scenario), instead of ns.
	spread []string
	// shards: session.Options.Shards of a leasehold session; 0 or 1 for
	// an unsharded one.
	shards int
}

type contender struct {
	name  string // row label
	group string // "raw", "floor", "leasehold", "peer"
	mutex bool   // a mutex: compared in the contended and TryLock scenarios
	// variant: a variant of "leasehold mutex" measured for information
	// only: never a target row, and left out where it measures nothing
	// new (the loss scenario).
	variant bool
	note    string
	// shards: a leasehold contender's session.Options.Shards (the cluster
	// scenario passes it on in procOpts); 0 for unsharded.
	shards int
	open   func(ctx context.Context, addr string, o procOpts) (proc, error)
}

func contenders() []contender {
	return []contender{
		{name: "raw SET NX PX + CAD", group: "raw", mutex: true, open: openRaw,
			note: "rueidis SET NX PX, compare-and-delete script; blocking Lock retries every 1 ms"},
		{name: "floor: lease check + clock token", group: "floor", open: openFloor,
			note: "not a lock library, never a peer (measured in the uncontended scenario; the cluster scenario has a sharded one): the least a grant script does under " +
				"issue 28's decisions (the caller's lease read with HMGET, a fencing token from TIME (µs), then SET; a release " +
				"script of GET and DEL), with none of leasehold's queue, lock delay or kept token: what the decisions " +
				"cost Redis and the client before any of leasehold's own work"},
		{name: "leasehold mutex", group: "leasehold", mutex: true, open: openLeasehold("mutex")},
		{name: "leasehold mutex, ctx never ends", group: "leasehold", mutex: true, variant: true,
			open: openLeaseholdNoCancel,
			note: "informational, not a target row: Lock, TryLock and Release with context.Background() " +
				"(Lock with the run's ctx where it waits, in the contended scenario); both rows run each call on " +
				"the caller's goroutine over the session's own connection (session.Options.Conn), so the " +
				"difference to \"leasehold mutex\" is what a cancelable ctx still costs: a context.AfterFunc per call"},
		{name: "leasehold semaphore", group: "leasehold", open: openLeasehold("semaphore"),
			note: "limit 1, weight 1; no peer has a semaphore"},
		{name: "leasehold pool", group: "leasehold", open: openLeasehold("pool"),
			note: "one member per pool; no peer has a pool"},
		{name: "leasehold rwmutex", group: "leasehold", open: openLeasehold("rwmutex"),
			note: "write (exclusive) Lock and Release; no peer has a read-write mutex"},
		{name: "rueidislock", group: "peer", mutex: true, open: openRueidislock(0),
			note: "defaults: KeyMajority 2 (3 keys), client-side caching for wake-ups"},
		{name: "rueidislock KeyMajority 1", group: "peer", mutex: true, open: openRueidislock(1)},
		{name: "redsync", group: "peer", mutex: true, open: openRedsync(false),
			note: "defaults: 32 tries, 50-250 ms random retry delay; go-redis v9 pool"},
		{name: "redsync 1ms", group: "peer", mutex: true, open: openRedsync(true),
			note: "WithRetryDelay(1ms); failed Lock calls (32 tries) are retried by the worker"},
		{name: "redislock 1ms", group: "peer", mutex: true, open: openRedislock,
			note: "LinearBackoff(1ms); go-redis v9"},
	}
}

func rueidisOpt(addr string, o procOpts) rueidis.ClientOption {
	opt := rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true, ForceSingleClient: true}
	if len(o.cluster) > 0 {
		opt.InitAddress, opt.ForceSingleClient = o.cluster, false
	}
	if o.small {
		opt.ReadBufferEachConn = 16 << 10
		opt.WriteBufferEachConn = 16 << 10
		opt.RingScaleEachConn = 8
	}
	return opt
}

func token() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// sleepCtx sleeps d unless ctx ends first.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, callTimeout)
}

// ---- raw: SET NX PX + compare-and-delete ----

var rawRelease = rueidis.NewLuaScript(`if redis.call("GET",KEYS[1]) == ARGV[1] then return redis.call("DEL",KEYS[1]) end return 0`)

type rawProc struct {
	c   rueidis.Client
	cnt *counter
	ns  string
	id  string
	seq atomic.Uint64
}

func openRaw(ctx context.Context, addr string, o procOpts) (proc, error) {
	c, err := rueidis.NewClient(rueidisOpt(addr, o))
	if err != nil {
		return nil, err
	}
	cnt := &counter{}
	return &rawProc{c: wrap(c, cnt), cnt: cnt, ns: o.ns, id: token()}, nil
}

func (p *rawProc) counter() *counter { return p.cnt }
func (p *rawProc) Close() error      { p.c.Close(); return nil }

func (p *rawProc) TryLock(ctx context.Context, key string) (unlocker, error) {
	key = p.ns + ":" + key
	val := p.id + strconv.FormatUint(p.seq.Add(1), 36)
	cctx, cancel := callCtx(ctx)
	err := p.c.Do(cctx, p.c.B().Set().Key(key).Value(val).Nx().PxMilliseconds(10000).Build()).Error()
	cancel()
	if rueidis.IsRedisNil(err) {
		return nil, errBusy
	}
	if err != nil {
		return nil, err
	}
	return releaseBy(p.c, rawRelease, val, key), nil
}

// releaseBy is the unlocker that runs script on keys with val.
func releaseBy(c rueidis.Client, script *rueidis.Lua, val string, keys ...string) unlocker {
	return func(ctx context.Context) error {
		ctx, cancel := callCtx(ctx)
		defer cancel()
		return script.Exec(ctx, c, keys, []string{val}).Error()
	}
}

func (p *rawProc) Lock(ctx context.Context, key string) (unlocker, error) {
	return everyMs(ctx, key, p.TryLock)
}

// everyMs is a blocking Lock made of try: tried every millisecond until it
// does not answer busy, or ctx ends.
func everyMs(ctx context.Context, key string, try func(context.Context, string) (unlocker, error)) (unlocker, error) {
	for {
		u, err := try(ctx, key)
		if !errors.Is(err, errBusy) {
			return u, err
		}
		if err := sleepCtx(ctx, time.Millisecond); err != nil {
			return nil, err
		}
	}
}

// ---- floor: a grant script with the lease check and a clock token ----

var (
	floorAcquire = rueidis.NewLuaScript(`local l = redis.call('HMGET', KEYS[2], 'g', 'x:' .. ARGV[1])
if l[1] ~= '0' or l[2] then return -1 end
local v = redis.call('GET', KEYS[1])
if v then return 0 end
local t = redis.call('TIME')
local us = t[2]
if #us < 6 then us = string.sub('00000' .. us, -6) end
redis.call('SET', KEYS[1], ARGV[1] .. '|' .. t[1] .. us, 'PX', ARGV[2])
return 1`)
	floorRelease = rueidis.NewLuaScript(`local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #ARGV[1] + 1) == ARGV[1] .. '|' then return redis.call('DEL', KEYS[1]) end
return 0`)
)

// floorProc is raw's proc with floor's scripts: its lease is a hash
// written once, at open. With procOpts.shards > 1 (the cluster scenario)
// it is sharded as a leasehold namespace is: a name lives in shard
// scripts.ShardOf(name, shards), under that shard's key prefix (a hash
// slot of its own), and every shard has a lease hash of its own, since
// the grant script must read the caller's lease in the slot of the name.
// Its calls then also declare the shard's migration probe, as every
// leasehold script does on a cluster (scripts.Keys.Probe): the probe
// is what keeps a script from running while its slot migrates, part of
// what a safe grant costs there, not leasehold's own work.
type floorProc struct {
	*rawProc
	keys   []scripts.Keys // one per shard; one for an unsharded floor
	leases []string       // the lease hash of each of keys
	probes []string       // the migration probe of each of keys; nil unsharded
}

func openFloor(ctx context.Context, addr string, o procOpts) (proc, error) {
	p, err := openRaw(ctx, addr, o)
	if err != nil {
		return nil, err
	}
	f := &floorProc{rawProc: p.(*rawProc)}
	if o.shards > 1 {
		for k := range o.shards {
			f.keys = append(f.keys, scripts.ShardKeys(o.ns, k))
		}
	} else {
		f.keys = []scripts.Keys{{Prefix: o.ns + ":"}}
	}
	cmds := make(rueidis.Commands, len(f.keys))
	for i, k := range f.keys {
		f.leases = append(f.leases, k.Lease(f.id))
		if o.shards > 1 {
			f.probes = append(f.probes, k.Probe())
		}
		cmds[i] = f.c.B().Hset().Key(f.leases[i]).FieldValue().FieldValue("g", "0").Build()
	}
	cctx, cancel := callCtx(ctx)
	defer cancel()
	for _, r := range f.c.DoMulti(cctx, cmds...) {
		if err := r.Error(); err != nil {
			f.c.Close()
			return nil, err
		}
	}
	return f, nil
}

func (p *floorProc) TryLock(ctx context.Context, key string) (unlocker, error) {
	k := 0
	if len(p.keys) > 1 {
		k = scripts.ShardOf(key, len(p.keys))
	}
	key = p.keys[k].Mutex(key)
	keys := []string{key, p.leases[k]}
	if p.probes != nil {
		keys = append(keys, p.probes[k])
	}
	hid := p.id + "." + strconv.FormatUint(p.seq.Add(1), 36)
	cctx, cancel := callCtx(ctx)
	r, err := floorAcquire.Exec(cctx, p.c, keys, []string{hid, "10000"}).AsInt64()
	cancel()
	switch {
	case err != nil:
		return nil, err
	case r == 0:
		return nil, errBusy
	case r != 1:
		return nil, fmt.Errorf("floor acquire: reply %d", r)
	}
	if p.probes != nil {
		return releaseBy(p.c, floorRelease, hid, key, p.probes[k]), nil
	}
	return releaseBy(p.c, floorRelease, hid, key), nil
}

func (p *floorProc) Lock(ctx context.Context, key string) (unlocker, error) {
	return everyMs(ctx, key, p.TryLock)
}

// ---- leasehold ----

type lhProc struct {
	kind string
	c    rueidis.Client
	cnt  *counter
	s    *session.Session

	// detached: TryLock and Release calls get context.Background()
	// instead of the caller's ctx; lockDetached: Lock calls too.
	detached, lockDetached bool

	mu    sync.Mutex
	pools map[string]bool // pools given their member
}

func openLeasehold(kind string) func(ctx context.Context, addr string, o procOpts) (proc, error) {
	return func(ctx context.Context, addr string, o procOpts) (proc, error) {
		c, err := rueidis.NewClient(rueidisOpt(addr, o))
		if err != nil {
			return nil, err
		}
		cnt := &counter{}
		if o.latency {
			cnt.leaseLat = &latencies{}
		}
		wc := wrap(c, cnt)
		s, err := openSession(ctx, wc, cnt, addr, o, o.ns)
		if err != nil {
			c.Close()
			return nil, err
		}
		p := &lhProc{kind: kind, c: wc, cnt: cnt, s: s, pools: map[string]bool{}}
		if err := p.openShards(ctx, o.shards); err != nil {
			_ = p.Close()
			return nil, err
		}
		return p, nil
	}
}

// openShards opens the lease copy of each of a sharded session's n shards
// (session.Options.Shards), as a long-running process has them: a copy is
// opened on the first call for a name of its shard, and subscribes to its
// notification channel (a dedicated connection) on its first Lock, both of
// which would otherwise fall in a scenario's window. It locks and releases
// one name of its own per shard; nothing for n <= 1.
func (p *lhProc) openShards(ctx context.Context, n int) error {
	prefix := "open-" + token() + "-"
	for k, i := 0, 0; k < n; i++ {
		name := prefix + strconv.Itoa(i)
		if scripts.ShardOf(name, n) != k {
			continue
		}
		lctx, cancel := callCtx(ctx)
		u, err := p.Lock(lctx, name)
		cancel()
		if err != nil {
			return fmt.Errorf("open shard %d: %w", k, err)
		}
		if err := u(ctx); err != nil {
			return fmt.Errorf("open shard %d: release: %w", k, err)
		}
		k++
	}
	return nil
}

// openSession opens a bench session in namespace ns on wc, a client of
// addr (or of o.cluster) that counts its requests in cnt.
func openSession(ctx context.Context, wc rueidis.Client, cnt *counter, addr string, o procOpts, ns string) (*session.Session, error) {
	octx, cancel := callCtx(ctx)
	defer cancel()
	// A bench namespace is brand new: its first grant would wait out
	// the restart grace. (A sharded one's every shard, and its guard.)
	if err := leaseholdtest.MarkIntactShards(octx, rueidisOpt(addr, o), ns, o.shards); err != nil {
		return nil, err
	}
	so := session.Options{Namespace: ns, TTL: o.ttl, Owner: "bench", Shards: o.shards}
	if len(o.cluster) == 0 {
		// The session's own connection, as session.Dial gives it one
		// (a cluster client has none); its requests are counted too.
		lane := countDials(rueidisOpt(addr, o), cnt)
		so.Conn = &lane
	}
	return session.New(octx, wc, so)
}

// openLeaseholdNoCancel opens the "ctx never ends" variant of the leasehold
// mutex (see contenders).
func openLeaseholdNoCancel(ctx context.Context, addr string, o procOpts) (proc, error) {
	p, err := openLeasehold("mutex")(ctx, addr, o)
	if err != nil {
		return nil, err
	}
	lp := p.(*lhProc)
	lp.detached, lp.lockDetached = true, !o.waits
	return lp, nil
}

func (p *lhProc) counter() *counter { return p.cnt }

func (p *lhProc) Close() error {
	err := p.s.Close()
	p.c.Close()
	return err
}

func (p *lhProc) acquire(ctx context.Context, key string, wait bool) (*session.Hold, error) {
	switch p.kind {
	case "mutex":
		m := mutex.New(p.s, key)
		if wait {
			return m.Lock(ctx)
		}
		return m.TryLock(ctx)
	case "semaphore":
		s := semaphore.New(p.s, key, 1)
		if wait {
			return s.Acquire(ctx, 1)
		}
		return s.TryAcquire(ctx, 1)
	case "pool":
		pl := pool.New(p.s, key)
		p.mu.Lock()
		added := p.pools[key]
		p.mu.Unlock()
		if !added {
			actx, cancel := callCtx(ctx)
			err := pl.Add(actx, "m")
			cancel()
			if err != nil {
				return nil, err
			}
			p.mu.Lock()
			p.pools[key] = true
			p.mu.Unlock()
		}
		if wait {
			return pl.Acquire(ctx)
		}
		return pl.TryAcquire(ctx)
	case "rwmutex":
		m := rwmutex.New(p.s, key)
		if wait {
			return m.Lock(ctx)
		}
		return m.TryLock(ctx)
	}
	return nil, fmt.Errorf("unknown kind %q", p.kind)
}

func (p *lhProc) hold(ctx context.Context, key string, wait bool) (*session.Hold, unlocker, error) {
	if p.detached && (!wait || p.lockDetached) {
		ctx = context.Background()
	}
	h, err := p.acquire(ctx, key, wait)
	if errors.Is(err, mutex.ErrLocked) || errors.Is(err, semaphore.ErrNoPermits) || errors.Is(err, pool.ErrExhausted) {
		return nil, nil, errBusy
	}
	if err != nil {
		return nil, nil, err
	}
	return h, func(ctx context.Context) error {
		if p.detached {
			return h.Release(context.Background())
		}
		ctx, cancel := callCtx(ctx)
		defer cancel()
		return h.Release(ctx)
	}, nil
}

// tryHold takes key without waiting and returns the hold.
func (p *lhProc) tryHold(ctx context.Context, key string) (*session.Hold, error) {
	h, _, err := p.hold(ctx, key, false)
	return h, err
}

func (p *lhProc) Lock(ctx context.Context, key string) (unlocker, error) {
	_, u, err := p.hold(ctx, key, true)
	return u, err
}

func (p *lhProc) TryLock(ctx context.Context, key string) (unlocker, error) {
	_, u, err := p.hold(ctx, key, false)
	return u, err
}

// ---- rueidislock ----

type rlProc struct {
	l   rueidislock.Locker
	cnt *counter
	ns  string
}

func openRueidislock(majority int32) func(ctx context.Context, addr string, o procOpts) (proc, error) {
	return func(ctx context.Context, addr string, o procOpts) (proc, error) {
		cnt := &counter{}
		opt := rueidisOpt(addr, o)
		opt.DisableCache = false // its default: wake-ups come from client-side caching invalidations
		l, err := rueidislock.NewLocker(rueidislock.LockerOption{
			ClientOption: opt,
			KeyMajority:  majority,
			ClientBuilder: func(o rueidis.ClientOption) (rueidis.Client, error) {
				c, err := rueidis.NewClient(o)
				if err != nil {
					return nil, err
				}
				return wrap(c, cnt), nil
			},
		})
		if err != nil {
			return nil, err
		}
		return &rlProc{l: l, cnt: cnt, ns: o.ns}, nil
	}
}

func (p *rlProc) counter() *counter { return p.cnt }
func (p *rlProc) Close() error      { p.l.Close(); return nil }

func (p *rlProc) Lock(ctx context.Context, key string) (unlocker, error) {
	_, cancel, err := p.l.WithContext(ctx, p.ns+":"+key)
	if err != nil {
		return nil, err
	}
	return func(context.Context) error { cancel(); return nil }, nil
}

func (p *rlProc) TryLock(ctx context.Context, key string) (unlocker, error) {
	_, cancel, err := p.l.TryWithContext(ctx, p.ns+":"+key)
	if errors.Is(err, rueidislock.ErrNotLocked) {
		return nil, errBusy
	}
	if err != nil {
		return nil, err
	}
	return func(context.Context) error { cancel(); return nil }, nil
}

// lockCtx acquires and also returns the lock's context (the loss signal).
func (p *rlProc) lockCtx(ctx context.Context, key string) (context.Context, context.CancelFunc, error) {
	return p.l.WithContext(ctx, p.ns+":"+key)
}

// ---- redsync (go-redis v9) ----

type rsProc struct {
	rc   *redis.Client
	rs   *redsync.Redsync
	cnt  *counter
	ns   string
	opts []redsync.Option
}

func newGoRedis(addr string, cnt *counter) *redis.Client {
	rc := redis.NewClient(&redis.Options{Addr: addr})
	rc.AddHook(goRedisHook{cnt})
	return rc
}

func openRedsync(fast bool) func(ctx context.Context, addr string, o procOpts) (proc, error) {
	return func(ctx context.Context, addr string, o procOpts) (proc, error) {
		cnt := &counter{}
		rc := newGoRedis(addr, cnt)
		p := &rsProc{rc: rc, rs: redsync.New(goredis.NewPool(rc)), cnt: cnt, ns: o.ns}
		if fast {
			p.opts = []redsync.Option{redsync.WithRetryDelay(time.Millisecond)}
		}
		return p, nil
	}
}

func (p *rsProc) counter() *counter { return p.cnt }
func (p *rsProc) Close() error      { return p.rc.Close() }

func (p *rsProc) unlock(m *redsync.Mutex) unlocker {
	return func(ctx context.Context) error {
		ctx, cancel := callCtx(ctx)
		defer cancel()
		ok, err := m.UnlockContext(ctx)
		if err == nil && !ok {
			err = errors.New("redsync: unlock failed")
		}
		return err
	}
}

func (p *rsProc) Lock(ctx context.Context, key string) (unlocker, error) {
	m := p.rs.NewMutex(p.ns+":"+key, p.opts...)
	if err := m.LockContext(ctx); err != nil {
		return nil, err
	}
	return p.unlock(m), nil
}

func (p *rsProc) TryLock(ctx context.Context, key string) (unlocker, error) {
	m := p.rs.NewMutex(p.ns+":"+key, p.opts...)
	err := m.TryLockContext(ctx)
	var taken *redsync.ErrTaken
	if errors.As(err, &taken) || errors.Is(err, redsync.ErrFailed) {
		return nil, errBusy
	}
	if err != nil {
		return nil, err
	}
	return p.unlock(m), nil
}

// ---- bsm/redislock (go-redis v9) ----

type rlkProc struct {
	rc  *redis.Client
	c   *redislock.Client
	cnt *counter
	ns  string
}

func openRedislock(ctx context.Context, addr string, o procOpts) (proc, error) {
	cnt := &counter{}
	rc := newGoRedis(addr, cnt)
	return &rlkProc{rc: rc, c: redislock.New(rc), cnt: cnt, ns: o.ns}, nil
}

func (p *rlkProc) counter() *counter { return p.cnt }
func (p *rlkProc) Close() error      { return p.rc.Close() }

const peerTTL = 10 * time.Second

func (p *rlkProc) unlock(l *redislock.Lock) unlocker {
	return func(ctx context.Context) error {
		ctx, cancel := callCtx(ctx)
		defer cancel()
		return l.Release(ctx)
	}
}

func (p *rlkProc) Lock(ctx context.Context, key string) (unlocker, error) {
	for {
		// Obtain gives up after the TTL when ctx has no deadline: try again.
		l, err := p.c.Obtain(ctx, p.ns+":"+key, peerTTL,
			&redislock.Options{RetryStrategy: redislock.LinearBackoff(time.Millisecond)})
		if ctx.Err() == nil && (errors.Is(err, redislock.ErrNotObtained) || errors.Is(err, context.DeadlineExceeded)) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return p.unlock(l), nil
	}
}

func (p *rlkProc) TryLock(ctx context.Context, key string) (unlocker, error) {
	cctx, cancel := callCtx(ctx)
	defer cancel()
	l, err := p.c.Obtain(cctx, p.ns+":"+key, peerTTL, nil)
	if errors.Is(err, redislock.ErrNotObtained) {
		return nil, errBusy
	}
	if err != nil {
		return nil, err
	}
	return p.unlock(l), nil
}
