package leaseholdtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/session"
)

// DefaultTTL is the lease TTL of the sessions that Session and Manager open
// when session.Options.TTL is zero (the library's own default is 10s). A lost
// lease is noticed within about one TTL, so a test of a Pause waits about that
// long; a shorter TTL would make such tests faster, but a loaded test machine
// (-race, parallel packages) could then delay a heartbeat past it and lose
// leases the test did not mean to lose.
const DefaultTTL = time.Second

// openTimeout bounds the opening of a session and each operator action.
const openTimeout = 10 * time.Second

// TB is the part of testing.TB the kit uses; *testing.T, *testing.B and
// *testing.F satisfy it.
type TB interface {
	Helper()
	Name() string
	Cleanup(func())
	Fatalf(format string, args ...any)
}

// An Option configures New.
type Option interface{ apply(*config) }

type config struct{ namespace string }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithNamespace sets the server's namespace: the one Session and Manager use
// when session.Options.Namespace is empty, and the one ResetMutex,
// ResetElection and RemovePoolMember act in. Default "leasehold", the
// library's default.
func WithNamespace(ns string) Option {
	return optionFunc(func(c *config) { c.namespace = ns })
}

// Server is an in-process Redis (miniredis) for one test, with the fault
// helpers. Its methods are safe for concurrent use; those that take a TB must
// be called from the goroutine running that test (they may call Fatalf).
type Server struct {
	ns   string // immutable
	addr string // immutable: RestartEmpty listens on the same address

	markMu sync.Mutex // serializes markIntact and RestartEmpty

	mu        sync.Mutex
	m         *miniredis.Miniredis // the running process; replaced by RestartEmpty
	g         *gate                // m's gate
	marked    map[string]bool      // namespaces marked intact
	restarted bool                 // RestartEmpty was called: nothing is marked intact any more
	grace     time.Duration        // longest restart grace of the sessions opened
	closed    bool
}

// New starts an in-process Redis (miniredis) on a free 127.0.0.1 port and
// registers a t.Cleanup that stops it. Cleanups run last-in first-out, so the
// sessions and clients made from the server are closed before it.
//
// The server behaves like a redis-server that has been running for a while:
// key TTLs count down on the wall clock, and the server's namespace is marked
// intact, so the first grant does not wait out a restart grace (see Session).
func New(t TB, opts ...Option) *Server {
	t.Helper()
	c := config{namespace: "leasehold"}
	for _, o := range opts {
		o.apply(&c)
	}
	m, g, err := start("127.0.0.1:0")
	if err != nil {
		t.Fatalf("leaseholdtest: start miniredis: %v", err)
	}
	s := &Server{ns: c.namespace, addr: m.Addr(), m: m, g: g, marked: map[string]bool{}}
	t.Cleanup(s.close)
	s.markIntact(t, s.ns, 1)
	return s
}

// start runs a fresh miniredis on addr with its TTLs on the wall clock and
// its commands behind a gate. It retries while addr is still taken (a restart
// on the port just closed).
func start(addr string) (*miniredis.Miniredis, *gate, error) {
	m := miniredis.NewMiniRedis()
	m.ClockTTL(true) // TTLs count down on the wall clock, as in Redis
	for deadline := time.Now().Add(5 * time.Second); ; {
		err := m.StartAddr(addr)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EADDRINUSE) || time.Now().After(deadline) {
			return nil, nil, err
		}
		time.Sleep(10 * time.Millisecond) // the port is still held: retry the bind
	}
	g := newGate()
	m.Server().SetPreHook(g.hook)
	return m, g, nil
}

func (s *Server) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	s.g.close() // release held commands, so that Close does not wait for them
	s.m.Close()
}

// Addr returns the server's address, "127.0.0.1:port". It stays the same
// across RestartEmpty.
func (s *Server) Addr() string { return s.addr }

// Namespace returns the server's namespace (see WithNamespace).
func (s *Server) Namespace() string { return s.ns }

// ClientOption returns rueidis options for a client of the server, as
// session.Dial or rueidis.NewClient take them: DisableCache (miniredis has no
// CLIENT TRACKING), ForceSingleClient (miniredis answers CLUSTER commands as a
// one-node cluster, and rueidis would then dial the address it advertises)
// and ConnWriteTimeout DefaultTTL/2, so that a paused server is noticed within
// a lease. With a TTL other than DefaultTTL, set ConnWriteTimeout below it
// (session.Dial sets TTL/2 when it is zero).
func (s *Server) ClientOption() rueidis.ClientOption {
	return rueidis.ClientOption{
		InitAddress:       []string{s.addr},
		DisableCache:      true,
		ForceSingleClient: true,
		ConnWriteTimeout:  DefaultTTL / 2,
	}
}

// Client returns a new rueidis client of the server, closed in t.Cleanup:
// for session.New, session.NewManager, or to look at keys. It is a client
// like any other: Pause holds its commands too.
func (s *Server) Client(t TB) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(s.ClientOption())
	if err != nil {
		t.Fatalf("leaseholdtest: connect to %s: %v", s.addr, err)
	}
	t.Cleanup(c.Close)
	return c
}

// Session opens a session on its own client (session.Dial), as a process of
// its own would, and registers a t.Cleanup that resumes the server if it is
// paused and closes the session. Zero fields of o get these defaults instead
// of the library's:
//
//   - TTL: DefaultTTL (1s);
//   - Namespace: the server's (WithNamespace);
//   - Owner: "leaseholdtest/" + t.Name();
//   - RestartGrace: the TTL (sessions of one namespace with different
//     TTLs need one RestartGrace, at least the longest TTL, set in each).
//
// The restart grace stays on, as in production, and costs nothing: the first
// Session or Manager of a namespace marks it intact first (MarkIntact), as
// a namespace in use whose data is complete. After RestartEmpty nothing is
// marked any more: the grants of a session opened then wait out the grace,
// as after a real data loss.
//
// Session fails the test at once while the server is paused, and if the
// session cannot be opened within 10s or o is invalid.
func (s *Server) Session(t TB, o session.Options) *session.Session {
	t.Helper()
	s.notPaused(t, "Session")
	o = s.defaults(t, o)
	s.markIntact(t, o.Namespace, o.Shards)
	opt := s.ClientOption()
	opt.ConnWriteTimeout = 0 // Dial sets TTL/2
	ctx, cancel := context.WithTimeout(context.Background(), openTimeout)
	defer cancel()
	ss, err := session.Dial(ctx, opt, o)
	if err != nil {
		t.Fatalf("leaseholdtest: open a session: %v", err)
	}
	t.Cleanup(func() {
		s.Resume() // Close releases the holds in Redis: it needs answers
		_ = ss.Close()
	})
	return ss
}

// Manager returns a session.Manager on a client of its own, with the
// defaults of Session, closed (with its client) in t.Cleanup after resuming
// the server if it is paused. Invalid options are reported by its Session and
// Run methods, as by session.NewManager. It fails the test at once while the
// server is paused.
func (s *Server) Manager(t TB, o session.Options) *session.Manager {
	t.Helper()
	s.notPaused(t, "Manager")
	o = s.defaults(t, o)
	s.markIntact(t, o.Namespace, o.Shards)
	opt := s.ClientOption()
	opt.ConnWriteTimeout = o.TTL / 2 // what session.Dial sets
	c, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatalf("leaseholdtest: connect to %s: %v", s.addr, err)
	}
	m := session.NewManager(c, o)
	t.Cleanup(func() {
		s.Resume()
		_ = m.Close()
		c.Close()
	})
	return m
}

// defaults fills in the kit's defaults and records the session's restart
// grace, which the operator sessions of the reset helpers use.
func (s *Server) defaults(t TB, o session.Options) session.Options {
	if o.TTL == 0 {
		o.TTL = DefaultTTL
	}
	if o.Namespace == "" {
		o.Namespace = s.ns
	}
	if o.Owner == "" {
		o.Owner = "leaseholdtest/" + t.Name()
	}
	if o.RestartGrace == 0 {
		o.RestartGrace = o.TTL
	}
	s.mu.Lock()
	s.grace = max(s.grace, o.RestartGrace)
	s.mu.Unlock()
	return o
}

// markIntact records, once per namespace (and shard count) and only before
// any RestartEmpty, that the namespace's data is complete (see MarkIntact
// and MarkIntactShards).
func (s *Server) markIntact(t TB, ns string, shards int) {
	t.Helper()
	s.markMu.Lock()
	defer s.markMu.Unlock()
	key := ns
	if shards > 1 {
		key = fmt.Sprintf("%s#%d", ns, shards)
	}
	s.mu.Lock()
	skip := s.restarted || s.marked[key]
	s.mu.Unlock()
	if skip {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), openTimeout)
	defer cancel()
	if err := MarkIntactShards(ctx, s.ClientOption(), ns, shards); err != nil {
		t.Fatalf("leaseholdtest: prepare namespace %q: %v", ns, err)
	}
	s.mu.Lock()
	s.marked[key] = true
	s.mu.Unlock()
}

// MarkIntact marks namespace ns ("" for the default, "leasehold") on the
// server opt reaches as holding all its data, so that the first grant of a
// session there does not wait out the restart grace (see
// session.Options.RestartGrace). It changes nothing when the namespace is
// in use. It is for tests and in-process examples on a brand-new server
// only, where no holder from before a data loss can still believe it holds
// something: on a server that lost its data it would let a session be
// granted what another still holds.
func MarkIntact(ctx context.Context, opt rueidis.ClientOption, ns string) error {
	o, err := lease.Options{Namespace: ns}.WithDefaults() // checks ns; "" is the default
	if err != nil {
		return err
	}
	opt.DisableCache = true // as session.Dial: a server without client tracking (miniredis) refuses it
	c, err := rueidis.NewClient(opt)
	if err != nil {
		return err
	}
	defer c.Close()
	return scripts.MarkIntact(ctx, c, scripts.NewKeys(o.Namespace))
}

// MarkIntactShards is MarkIntact for a namespace of shards shards
// (session.Options.Shards): it marks each shard, which the first session
// to open there records the shard count in, and lays the namespace out
// with that shard count, so that a session of another count is refused
// (session.ErrShardsMismatch). Like MarkIntact, it changes nothing in a
// namespace in use, here also one laid out with another shard count or
// unsharded. With shards 0 or 1 it is MarkIntact.
func MarkIntactShards(ctx context.Context, opt rueidis.ClientOption, ns string, shards int) error {
	o, err := lease.Options{Namespace: ns, Shards: shards}.WithDefaults()
	if err != nil {
		return err
	}
	if o.Shards <= 1 {
		return MarkIntact(ctx, opt, ns)
	}
	opt.DisableCache = true
	c, err := rueidis.NewClient(opt)
	if err != nil {
		return err
	}
	defer c.Close()
	return scripts.MarkIntactShards(ctx, c, o.Namespace, o.Shards)
}
