package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/internal/conn"
	"github.com/leasehold/leasehold/internal/scripts"
)

// Group is a sharded session (Options.Shards > 1): one id and, per shard of
// the namespace the session has used, a lease copy. A copy is a Session of
// its own on the shard's keys (see scripts.ShardKeys), with every
// guarantee of an unsharded session inside its shard: its lease, heartbeat,
// restart grace, reclaim and loss. It is opened on the first call for a
// name of its shard, and replaced on the first call after it ended; a
// grant checks the copy of its own shard, in the same script as today, so
// none of the single-slot safety arguments changes. What binds the shards
// together is the shard count, recorded in the namespace's guard and in
// every shard's epoch marker (see scripts.GuardShards): a session with
// another count is refused before it can grant anything.
//
// The Group itself ends only on Close: a copy's loss ends the holds of its
// shard (ErrLeaseLost), as an unsharded session's loss ends all of its
// holds, and the next call in that shard opens a new copy, under the
// shard's restart grace when its data was lost.
type Group struct {
	c        rueidis.Client // immutable: the client as given (Client, and closed by Close when own)
	bound    rueidis.Client // immutable: c bound for calls (conn.Bound)
	own      bool           // immutable: Close closes c
	opt      Options        // immutable: with defaults
	id       string         // immutable
	lane     *conn.Lane     // immutable: shared by the copies; nil for none
	envs     []scripts.Env  // immutable: per shard, for the calls that need no lease copy
	ctx      context.Context
	cancel   context.CancelCauseFunc
	nextHold atomic.Uint64 // the copies' hold id counter: hold ids stay unique across shards
	shards   []groupShard
	phase    time.Time  // immutable: the copies' heartbeats leave together at phase + k × Heartbeat (Session.nextBeat)
	beats    *beatBatch // immutable: sends the copies' heartbeats and the guard's re-assert of a tick as one pipeline
	sub      *sharedSub // immutable: the copies' one notification connection

	retired sync.WaitGroup // the Close of copies that ended and were replaced

	goes owned // Go's goroutines and assertGuard; Close waits for them

	closeOnce sync.Once
	closeErr  error
}

type groupShard struct {
	opening chan struct{}           // buffer 1: held while a copy is opened or closed
	cur     atomic.Pointer[Session] // the current copy, nil before the first use and after it was retired
	gen     int                     // guarded by opening: copies opened so far

	// Read and written by assertGuard's goroutine only (retireIdle).
	idleOf    *Session // the copy seen quiet at the last ticks
	idleUses  uint64   // its uses then
	idleTicks int      // ticks it has been seen quiet with no new use
}

// idleCopyTicks is how many heartbeat ticks in a row a copy must be seen
// with no hold, no waiting claim, no watcher and no call before the Group
// closes it (retireIdle): 10 intervals, about 3.3 TTLs. A shard used again
// later opens a new copy (one round trip on that call).
var idleCopyTicks = 10 // a variable for tests

// DialGroup is Dial for a sharded session.
func DialGroup(ctx context.Context, opt rueidis.ClientOption, o Options) (*Group, error) {
	return dialWith(ctx, opt, o, func(c rueidis.Client, o Options) (*Group, error) {
		return openGroup(ctx, c, o, true)
	})
}

// NewGroup is New for a sharded session.
func NewGroup(ctx context.Context, c rueidis.Client, o Options) (*Group, error) {
	o, err := o.WithDefaults()
	if err != nil {
		return nil, err
	}
	return openGroup(ctx, c, o, false)
}

func openGroup(ctx context.Context, c rueidis.Client, o Options, own bool) (*Group, error) {
	if o.Shards < 2 {
		return nil, fmt.Errorf("%w: a Group needs Shards > 1", ErrInvalidOptions)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.TTL)
		defer cancel()
	}
	bound := conn.Bound(c)
	if err := checkVersion(ctx, bound); err != nil {
		return nil, err
	}
	g := &Group{c: c, bound: bound, own: own, opt: o, id: newID(), shards: make([]groupShard, o.Shards), phase: time.Now(), sub: newSharedSub(c)}
	if err := g.checkShards(ctx); err != nil {
		return nil, err
	}
	lane, err := newLane(ctx, c, o)
	if err != nil {
		return nil, err
	}
	g.lane = lane
	g.envs = make([]scripts.Env, o.Shards)
	for k := range g.shards {
		g.shards[k].opening = make(chan struct{}, 1)
		g.envs[k] = scripts.Env{
			C: conn.BoundLane(c, lane), K: scripts.ShardKeys(o.Namespace, k),
			Grace: o.RestartGrace, Acks: o.ReplicaAck, AckTimeout: o.ReplicaAckTimeout,
			Log: o.Logger, LockDelay: o.LockDelay, TTL: o.TTL, Shards: o.Shards, Guard: g.checkShards,
		}
	}
	g.ctx, g.cancel = context.WithCancelCause(context.Background())
	g.beats = newBeatBatch(bound, min(20*time.Millisecond, o.Heartbeat/10))
	g.beats.join(1) // the guard's re-assert
	g.goes.Go(g.ctx, func(context.Context) { g.assertGuard() })
	// Shard 0's copy now: a session that does not fit the restart grace the
	// namespace records is refused here, as an unsharded one is, not at
	// its first call in each shard. (Unused, it is retired as any copy.)
	if _, err := g.open(ctx, 0); err != nil {
		g.own = false // the caller closes c
		_ = g.Close()
		return nil, err
	}
	o.Logger.Debug("sharded session opened", "session", g.id, "shards", o.Shards)
	return g, nil
}

// checkShards makes sure that the namespace has the group's shard count
// (scripts.GuardShards): at open, and before a shard's epoch marker is
// recreated after a data loss.
func (g *Group) checkShards(ctx context.Context) error {
	err := scripts.GuardShards(ctx, g.bound, g.opt.Namespace, g.opt.Shards, g.opt.RestartGrace)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, scripts.ErrShardsMismatch):
		return fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	return redisErr("check the namespace's shard count", err)
}

// assertGuard re-asserts the namespace's guard at every tick of the
// group's heartbeat (scripts.AssertShards), until Close: should the master
// of {ns} lose its data, the guard is back within one interval, and a
// session without the shard count (or of a release before shards) that
// opened in the gap is still inside its restart grace, which is at least
// its TTL, when its scripts start failing on the hash. The request goes
// with the copies' heartbeats (same ticks), to the node that owns {ns}.
func (g *Group) assertGuard() {
	hb := g.opt.Heartbeat
	t := time.NewTimer(hb)
	defer t.Stop()
	for {
		select {
		case <-g.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(g.ctx, g.opt.TTL)
		replaced, err := scripts.AssertShards(ctx, g.beats, g.opt.Namespace, g.opt.Shards)
		cancel()
		switch {
		case replaced:
			g.opt.Logger.Error("the namespace's guard was lost and an unsharded session wrote its epoch marker meanwhile: "+
				"guard restored; that session can no longer open or grant (run every process of the namespace with the same Shards)",
				"session", g.id, "namespace", g.opt.Namespace, "shards", g.opt.Shards)
		case errors.Is(err, scripts.ErrShardsMismatch):
			g.opt.Logger.Error("the namespace's guard records another shard count: sessions of two layouts may share it",
				"session", g.id, "err", err)
		case err != nil && g.ctx.Err() == nil:
			g.opt.Logger.Warn("re-asserting the namespace's shard guard failed; retrying at the next tick", "session", g.id, "err", err)
		}
		g.retireIdle()
		now := time.Now()
		t.Reset(g.phase.Add((now.Sub(g.phase)/hb + 1) * hb).Sub(now))
	}
}

// retireIdle closes the copies that have been idle for idleCopyTicks ticks
// and those that ended (lost): a copy exists only while the session holds,
// waits or watches something in its shard, or has lately. It runs at each
// tick of assertGuard's goroutine.
func (g *Group) retireIdle() {
	for k := range g.shards {
		sh := &g.shards[k]
		s := sh.cur.Load()
		switch {
		case s == nil:
			continue
		case s.usable() != nil:
			g.retire(sh, s)
			continue
		case !s.quiet():
			sh.idleOf = nil
			continue
		}
		if u := s.uses.Load(); sh.idleOf != s || sh.idleUses != u {
			sh.idleOf, sh.idleUses, sh.idleTicks = s, u, 0
			continue
		}
		if sh.idleTicks++; sh.idleTicks >= idleCopyTicks {
			sh.idleOf = nil
			g.retire(sh, s)
		}
	}
}

// retire takes copy s out of its shard and closes it, unless a call is on
// it or it is in use again. A call takes a copy with Group.use, which counts
// itself on the copy before it checks that the copy is still the shard's:
// retire takes the copy out before it checks the count, so either retire
// sees the call, or the call sees the copy gone and opens a new one.
func (g *Group) retire(sh *groupShard, s *Session) {
	select {
	case sh.opening <- struct{}{}:
		defer func() { <-sh.opening }()
	default:
		return // being opened, or the group closes: try at the next tick
	}
	if !sh.cur.CompareAndSwap(s, nil) {
		return
	}
	if s.users.Load() != 0 || (s.usable() == nil && !s.quiet()) {
		sh.cur.Store(s)
		return
	}
	g.beats.join(-1)
	g.retired.Go(func() { _ = s.Close() })
}

// For returns the lease copy of the shard name lives in, opening one when
// the shard has none or its copy has ended. The copy's open is bounded by
// ctx and by the group's end. An invalid name opens nothing (an error
// matching ErrInvalidName); a copy that exists already checks the names of
// its calls itself (Session.Claim), so the fast path does not.
func (g *Group) For(ctx context.Context, name string) (*Session, error) {
	return g.forShard(ctx, scripts.ShardOf(name, g.opt.Shards), name)
}

func (g *Group) forShard(ctx context.Context, k int, name string) (*Session, error) {
	if s := g.shards[k].cur.Load(); s != nil && s.usable() == nil {
		return s, nil
	}
	if err := CheckName(name); err != nil {
		return nil, err
	}
	return g.open(ctx, k)
}

// use is For for a call on the copy: it returns the copy with the call
// counted on it (enter; the caller calls leave), so that the copy is not
// retired under the call (see retire).
func (g *Group) use(ctx context.Context, name string) (*Session, error) {
	k := scripts.ShardOf(name, g.opt.Shards)
	for {
		s, err := g.forShard(ctx, k, name)
		if err != nil {
			return nil, err
		}
		if useHook != nil {
			useHook(false, s)
		}
		s.enter()
		if g.shards[k].cur.Load() == s {
			if useHook != nil {
				useHook(true, s)
			}
			return s, nil
		}
		s.leave() // retired meanwhile
	}
}

// useHook, when set (by tests), runs in use after it found the copy and
// after it counted itself on it (entered).
var useHook func(entered bool, s *Session)

func (g *Group) open(ctx context.Context, k int) (*Session, error) {
	sh := &g.shards[k]
	select {
	case sh.opening <- struct{}{}:
		defer func() { <-sh.opening }()
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	case <-g.ctx.Done():
		return nil, context.Cause(g.ctx)
	}
	if s := sh.cur.Load(); s != nil && s.usable() == nil {
		return s, nil
	}
	if g.ctx.Err() != nil {
		return nil, context.Cause(g.ctx)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(g.ctx, func() { cancel(context.Cause(g.ctx)) })()
	s, err := open(ctx, g.c, g.opt, false, &shardSpec{k: k, phase: g.phase, beats: g.beats,
		id: scripts.CopyID(g.id, sh.gen), lane: g.lane, guard: g.checkShards, nextHold: &g.nextHold, sub: g.sub})
	if err != nil {
		return nil, err
	}
	sh.gen++
	if old := sh.cur.Swap(s); old != nil {
		g.retired.Go(func() { _ = old.Close() })
	} else {
		g.beats.join(1)
	}
	return s, nil
}

// ClaimPublic is Session.ClaimPublic on the copy of r's shard. When that
// copy ends during the call (its lease lost: ErrLeaseLost) while the group
// and ctx go on, the call starts again on a new copy, as a call on a
// session whose Err is nil should: a lost copy's queue entries and grants
// are dead with its lease.
func (g *Group) ClaimPublic(ctx context.Context, r scripts.Resource, wait bool) (any, error) {
	for try := 1; ; try++ {
		s, err := g.use(ctx, r.Name)
		if errors.Is(err, ErrInvalidName) {
			return nil, fmt.Errorf("%s: %w", r.Kind, err) // as Session.Claim words it
		}
		if err != nil {
			return nil, err
		}
		pub, err := s.ClaimPublic(ctx, r, wait)
		s.leave()
		if err == nil || !errors.Is(err, ErrLeaseLost) || ctx.Err() != nil || g.ctx.Err() != nil || try == maxCopyTries {
			return pub, err
		}
	}
}

// maxCopyTries bounds the copies one call tries (Group.ClaimPublic): a
// copy lost during a call is rare; copies lost one after another mean
// something deletes the namespace's leases, and the call says so.
const maxCopyTries = 3

// Env returns what the calls for name that need no lease copy (inspect,
// reset, stats) run their scripts with: the keys of name's shard.
func (g *Group) Env(name string) scripts.Env {
	return g.envs[scripts.ShardOf(name, g.opt.Shards)]
}

// ID is session.Session.ID: the group's id, which every copy's id starts with.
func (g *Group) ID() string { return g.id }

// Context is session.Session.Context: canceled by Close only.
func (g *Group) Context() context.Context { return g.ctx }

// Done is session.Session.Done.
func (g *Group) Done() <-chan struct{} { return g.ctx.Done() }

// Err is session.Session.Err: ErrClosed after Close, else nil.
func (g *Group) Err() error {
	if g.ctx.Err() != nil {
		return context.Cause(g.ctx)
	}
	return nil
}

// Deadline is session.Session.Deadline: the earliest local deadline of the
// group's live copies; the zero time when it has none.
func (g *Group) Deadline() time.Time {
	var d time.Time
	for k := range g.shards {
		if s := g.shards[k].cur.Load(); s != nil && s.usable() == nil {
			if sd := s.Deadline(); d.IsZero() || sd.Before(d) {
				d = sd
			}
		}
	}
	return d
}

// Options returns the group's options with defaults filled in.
func (g *Group) Options() Options { return g.opt }

// Client is session.Session.Client.
func (g *Group) Client() rueidis.Client { return g.c }

// Go is Session.Go, for the group: ctx is canceled by Close.
func (g *Group) Go(f func(ctx context.Context)) bool { return g.goes.Go(g.ctx, f) }

// Close is session.Session.Close: it closes every copy, in parallel (each
// releases its holds and deletes its lease), after waiting for any copy
// being opened, and then the group's connection and, for DialGroup, client.
func (g *Group) Close() error {
	g.closeOnce.Do(func() {
		g.cancel(ErrClosed)
		var mu sync.Mutex
		var errs []error
		var wg sync.WaitGroup
		for k := range g.shards {
			sh := &g.shards[k]
			sh.opening <- struct{}{} // an open in progress ends with g.ctx
			s := sh.cur.Load()
			if s == nil {
				continue
			}
			wg.Go(func() {
				if err := s.Close(); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		g.retired.Wait()
		g.goes.close()
		g.sub.close(g.opt.TTL)
		g.closeErr = errors.Join(errs...)
		if g.lane != nil || g.own {
			done := make(chan struct{})
			go func() {
				if g.lane != nil {
					g.lane.Close()
				}
				if g.own {
					g.c.Close()
				}
				close(done)
			}()
			t := time.NewTimer(g.opt.TTL)
			defer t.Stop()
			select {
			case <-done:
			case <-t.C:
			}
		}
	})
	return g.closeErr
}
