package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/internal/clock"
	"github.com/leasehold/leasehold/internal/conn"
	"github.com/leasehold/leasehold/internal/scripts"
)

// Session is the lease behind a session.Session: its state, its loop
// goroutine and its hold table. Its exported methods are documented on
// session.Session; the ones it has beyond them are for the primitives,
// reached through internal/hook.
type Session struct {
	// Immutable after open.
	env        scripts.Env             // immutable: the client, keys and script settings
	beatEnv    scripts.Env             // immutable: env, but a Group's copy sends its heartbeats through the Group's beatBatch
	opt        Options                 // immutable: with defaults
	id         string                  // immutable
	own        bool                    // immutable: Close closes env.C
	lane       *conn.Lane              // immutable: the session's connection for its calls (see Options.Conn); nil for none
	ownLane    bool                    // immutable: Close closes lane (a shard copy shares its Group's)
	phase      time.Time               // immutable: a Group's copies heartbeat at phase + k × Heartbeat; zero: unsharded
	base       time.Time               // immutable: monotonic origin of deadline
	ctx        context.Context         // immutable; canceled by end (the loop)
	cancel     context.CancelCauseFunc // immutable; called only by end (the loop)
	ownChannel string                  // immutable: {ns}:n:<sid>
	met        *metrics                // immutable; nil without Options.Metrics
	reqs       chan func(*loop)        // immutable: requests to the loop goroutine
	exited     chan struct{}           // immutable; closed by the loop goroutine when it returns
	logq       *logQueue               // immutable: the loop's and the scripts' log records

	// Written by the loop goroutine, read by anyone: atomics.
	deadline atomic.Int64 // local lease deadline, ns since base
	// ended is why the session ended, stored by the loop (end) before it
	// ends any hold and cancels ctx: whoever sees a hold end for the
	// session's end (lost, closed) finds Err already set.
	ended   atomic.Pointer[error]
	subOK   atomic.Bool                   // ownChannel subscribed (read by Claim's fast path)
	recheck atomic.Pointer[chan struct{}] // swapped and closed by the loop when notifications may have been missed

	nextHold *atomic.Uint64 // hold id counter, shared by a Group's copies; any goroutine (Claim)

	// A Group's copy: the calls on it now (a claim from Group.use, a
	// Release) and how many were ever started, which Group.retireIdle reads.
	users atomic.Int64
	uses  atomic.Uint64

	holds    holdTable // guarded by holds.mu: grants and releases, and the loop
	waiters  waiters   // guarded by waiters.mu: Claim adds and removes, rueidis' reader delivers
	watchers watchers  // guarded by watchers.mu: Watch adds and removes, rueidis' reader delivers

	goes owned // the goroutines started by Go; Close waits for them

	dedMu sync.Mutex     // guards dedCh
	dedCh chan dedicated // guarded by dedMu: the Dedicate in flight, if any (see dedicate)
	sub   *sharedSub     // immutable: a Group copy's notification connection, shared; nil: its own

	closeOnce sync.Once // runs Close's body once
	closeErr  error     // written inside closeOnce, read after it
}

// Dial is session.Dial.
func Dial(ctx context.Context, opt rueidis.ClientOption, o Options) (*Session, error) {
	return dialWith(ctx, opt, o, func(c rueidis.Client, o Options) (*Session, error) {
		return open(ctx, c, o, true, nil)
	})
}

// dialWith validates o, builds the client Dial builds and runs open on it,
// closing the client when open fails.
func dialWith[T any](ctx context.Context, opt rueidis.ClientOption, o Options, open func(rueidis.Client, Options) (T, error)) (T, error) {
	var zero T
	o, err := o.WithDefaults()
	if err != nil {
		return zero, err
	}
	opt = clientOptions(opt, o.TTL)
	if o.Conn == nil {
		lo := opt
		o.Conn = &lo
	}
	c, err := conn.NewClient(ctx, opt)
	if err != nil {
		return zero, redisErr("dial", err)
	}
	s, err := open(c, o)
	if err != nil {
		go c.Close() // closing a connection to a silent server takes up to a second
		return zero, err
	}
	return s, nil
}

// clientOptions returns opt as the session needs a client it builds: no
// client-side caching (leasehold uses none, and with it on rueidis cannot
// connect to a server without RESP3 or CLIENT TRACKING), and unless set, a
// ConnWriteTimeout of TTL/2, so that a stalled server is noticed within the
// lease rather than after rueidis' default of 10s.
func clientOptions(opt rueidis.ClientOption, ttl time.Duration) rueidis.ClientOption {
	opt.DisableCache = true
	if opt.ConnWriteTimeout == 0 {
		opt.ConnWriteTimeout = ttl / 2
	}
	return opt
}

// New is session.New.
func New(ctx context.Context, c rueidis.Client, o Options) (*Session, error) {
	o, err := o.WithDefaults()
	if err != nil {
		return nil, err
	}
	if o.Shards > 1 {
		return nil, fmt.Errorf("%w: a sharded session is a Group (NewGroup)", ErrInvalidOptions)
	}
	return open(ctx, c, o, false, nil)
}

// shardSpec makes a session one lease copy of a Group: in shard k of the
// namespace, with a given id, on the Group's connection and hold counter.
type shardSpec struct {
	k        int
	phase    time.Time
	beats    rueidis.Client // the Group's beatBatch
	id       string
	lane     *conn.Lane
	guard    func(context.Context) error
	nextHold *atomic.Uint64
	sub      *sharedSub // the Group's notification connection
}

func open(ctx context.Context, c rueidis.Client, o Options, own bool, sp *shardSpec) (*Session, error) {
	met, err := newMetrics(o.Metrics)
	if err != nil {
		return nil, fmt.Errorf("session: metrics: %w", err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.TTL)
		defer cancel()
	}
	keys, lane, ownLane, err := prepare(ctx, c, o, sp)
	if err != nil {
		return nil, err
	}
	lq := newLogQueue()
	s := &Session{
		met:  met,
		logq: lq,
		env: scripts.Env{
			C: conn.BoundLane(c, lane),
			K: keys,
			// A sharded namespace notifies with PUBLISH even on a
			// cluster: its copies' channels are in many slots (see
			// docs/design.md, "A namespace across a Cluster").
			Sharded:    c.Mode() == rueidis.ClientModeCluster && o.Shards <= 1,
			Grace:      o.RestartGrace,
			Acks:       o.ReplicaAck,
			AckTimeout: o.ReplicaAckTimeout,
			Log:        lq.logger(o.Logger.Handler()),
			LockDelay:  o.LockDelay,
			TTL:        o.TTL,
			Shards:     o.Shards,
		}.Prepared(),
		opt:      o,
		own:      own,
		lane:     lane,
		ownLane:  ownLane,
		reqs:     make(chan func(*loop), 64),
		exited:   make(chan struct{}),
		nextHold: new(atomic.Uint64),
	}
	s.beatEnv = s.env
	if sp != nil {
		s.env.Guard, s.nextHold, s.phase, s.sub = sp.guard, sp.nextHold, sp.phase, sp.sub
		s.beatEnv = s.env
		s.beatEnv.C = sp.beats
	}
	s.waiters.m = make(map[string]*waitEntry)
	s.holds.m = make(map[string]*Hold)
	s.holds.early = make(map[string]time.Time)
	rc := make(chan struct{})
	s.recheck.Store(&rc)
	s.ctx, s.cancel = context.WithCancelCause(context.Background())

	opened := false
	defer func() {
		if !opened {
			lq.close()
			if ownLane {
				go lane.Close()
			}
		}
	}()
	for range 3 { // a taken id is astronomically unlikely; retry anyway
		s.id = newID()
		if sp != nil {
			s.id = sp.id
		}
		sent := time.Now()
		// A grant confirmed after its own deadline would be a lost session.
		octx, cancel := context.WithDeadline(ctx, clock.Deadline(sent, o.TTL))
		ok, replID, err := s.env.OpenLease(octx, s.id, o.Owner, o.TTL, o.LockDelay)
		cancel()
		if err == nil && ok && !time.Now().Before(clock.Deadline(sent, o.TTL)) {
			err = errors.New("lease confirmed after its deadline")
		}
		if errors.Is(err, scripts.ErrGraceMismatch) || errors.Is(err, scripts.ErrShardsMismatch) {
			return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
		}
		if err != nil {
			return nil, redisErr("open lease", err)
		}
		if ok {
			s.ownChannel = s.env.K.Channel(s.id)
			s.base = sent
			s.deadline.Store(int64(clock.Deadline(sent, o.TTL).Sub(sent)))
			l := newLoop(s, sent)
			l.replID = replID
			met.sessionOpened()
			opened = true
			go l.run()
			o.Logger.Debug("session opened", "session", s.id, "ttl", o.TTL)
			return s, nil
		}
	}
	return nil, errors.New("session: could not find a free session id")
}

// prepare returns the keys and the connection of a session about to open:
// for a Group's copy, its shard's keys and the Group's connection (the
// Group checked the Redis version); else the namespace's keys and, when o
// asks for one, a connection of its own (ownLane), after checking the
// Redis version.
func prepare(ctx context.Context, c rueidis.Client, o Options, sp *shardSpec) (scripts.Keys, *conn.Lane, bool, error) {
	if sp != nil {
		return scripts.ShardKeys(o.Namespace, sp.k), sp.lane, false, nil
	}
	if err := checkVersion(ctx, conn.Bound(c)); err != nil { // Bound: a redial must not hold it past ctx
		return scripts.Keys{}, nil, false, err
	}
	lane, err := newLane(ctx, c, o)
	if err != nil {
		return scripts.Keys{}, nil, false, err
	}
	return scripts.NewKeys(o.Namespace), lane, lane != nil, nil
}

// newLane dials the session's own connection when o asks for one and c is
// a standalone client (see conn.Lane); nil otherwise.
func newLane(ctx context.Context, c rueidis.Client, o Options) (*conn.Lane, error) {
	if o.Conn == nil || c.Mode() != rueidis.ClientModeStandalone {
		return nil, nil
	}
	lane, err := conn.NewLane(ctx, clientOptions(*o.Conn, o.TTL))
	if err != nil {
		return nil, redisErr("dial the session's connection", err)
	}
	return lane, nil
}

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails on supported platforms
	return hex.EncodeToString(b[:])
}

// nextBeat returns when to send the heartbeat after one sent at sent: a
// Heartbeat interval later, or for a Group's copy the Group's next tick
// after sent (never later), so that the copies' heartbeats leave together
// and rueidis writes those for one node in one pipeline flush, whenever
// each copy was opened. A heartbeat sent early is always safe: the
// deadline counts from its send.
func (s *Session) nextBeat(sent time.Time) time.Time {
	hb := s.opt.Heartbeat
	if s.phase.IsZero() || sent.Before(s.phase) {
		return sent.Add(hb)
	}
	return s.phase.Add((sent.Sub(s.phase)/hb + 1) * hb)
}

// ID is session.Session.ID.
func (s *Session) ID() string { return s.id }

// Context is session.Session.Context.
func (s *Session) Context() context.Context { return s.ctx }

// Done is session.Session.Done.
func (s *Session) Done() <-chan struct{} { return s.ctx.Done() }

// Err is session.Session.Err. The loop stores ended before it ends any
// hold for the session's end (see end).
func (s *Session) Err() error {
	if p := s.ended.Load(); p != nil {
		return *p
	}
	return s.pastDeadline()
}

// pastDeadline returns ErrLeaseLost once the local deadline has passed: the
// deadline timer is about to cancel everything.
func (s *Session) pastDeadline() error {
	if time.Now().Before(s.Deadline()) {
		return nil
	}
	return fmt.Errorf("%w: the local deadline has passed", ErrLeaseLost)
}

// Deadline is session.Session.Deadline.
func (s *Session) Deadline() time.Time {
	return s.base.Add(time.Duration(s.deadline.Load()))
}

// Close is session.Session.Close.
func (s *Session) Close() error {
	s.closeOnce.Do(func() {
		cutoff := time.Now().Add(s.opt.TTL)
		reply := make(chan error, 1)
		select {
		case s.reqs <- func(l *loop) { l.close(reply) }:
			// The loop answers before it exits, so the answer is there by
			// the time exited is closed; a select over both could pick
			// exited, both being ready, and lose it.
			<-s.exited
			select {
			case s.closeErr = <-reply:
			default: // the loop exited before it took the request
			}
		case <-s.exited:
		}
		s.goes.close()
		// What is left may wait on a silent server or a slow log handler:
		// rueidis closes its connections one by one, each taking up to a
		// second. Wait for it only until the TTL since Close began, then
		// let it finish on its own.
		t := time.NewTimer(max(time.Until(cutoff), 0))
		defer t.Stop()
		if s.own || s.ownLane {
			closed := make(chan struct{})
			go func() {
				if s.ownLane {
					s.lane.Close()
				}
				if s.own {
					s.env.C.Close()
				}
				close(closed)
			}()
			select {
			case <-closed:
			case <-t.C:
				return
			}
		}
		select {
		case <-s.logq.done:
		case <-t.C:
		}
	})
	return s.closeErr
}

// Go runs f in a goroutine that the session owns: ctx is canceled when the
// session ends, and Close waits for f to return. It reports false, without
// running f, once the session is closed. It is for leasehold's own packages
// (election.Observe), so that only the session starts long-lived goroutines.
func (s *Session) Go(f func(ctx context.Context)) bool { return s.goes.Go(s.ctx, f) }

// Env returns what leasehold's primitives need to run their scripts. It is
// for leasehold's own packages; its type is internal.
func (s *Session) Env() scripts.Env { return s.env }

// Client is session.Session.Client.
func (s *Session) Client() rueidis.Client { return conn.Unbound(s.env.C) }

// Options returns the session's options with defaults filled in.
func (s *Session) Options() Options { return s.opt }

func (s *Session) newHoldID() string {
	return scripts.HoldID(s.id, s.nextHold.Add(1))
}

// post sends f to the loop without waiting for it to run. It reports false
// when the loop has exited.
func (s *Session) post(f func(*loop)) bool {
	select {
	case s.reqs <- f:
		return true
	case <-s.exited:
		return false
	}
}

// opCtx bounds one Redis call by ctx and by the local lease deadline: after
// it the session is over anyway. (A call in flight when the session is
// closed runs to its end; a grant it brings back is refused by the closed
// hold table, and the deleted lease invalidates it in Redis.)
func (s *Session) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return conn.Until(ctx, s.Deadline())
}

// enter and leave bracket a call on a Group's copy (see Group.retire).
func (s *Session) enter() { s.users.Add(1); s.uses.Add(1) }
func (s *Session) leave() { s.users.Add(-1) }

// quiet reports whether s has no hold, no waiting claim and no watcher.
func (s *Session) quiet() bool {
	s.holds.mu.Lock()
	n := len(s.holds.m)
	s.holds.mu.Unlock()
	s.waiters.mu.Lock()
	n += len(s.waiters.m)
	s.waiters.mu.Unlock()
	s.watchers.mu.Lock()
	n += len(s.watchers.m)
	s.watchers.mu.Unlock()
	return n == 0
}

// usable returns nil while the session can grant, else the cause of its end.
func (s *Session) usable() error {
	if p := s.ended.Load(); p != nil {
		return *p
	}
	return nil
}

// end records cause as the session's end, ends every hold with it, then
// cancels the session's context: in that order, so that a hold ended this
// way implies Err, and Done implies that every hold has ended. Only the loop
// calls it.
func (s *Session) end(cause error) {
	s.ended.Store(&cause)
	s.holds.endAll(cause)
	s.cancel(cause)
}
