package lease

// Deterministic timing tests of the session's lease handling.
//
// Every test that needs Redis runs inside a testing/synctest bubble with
// miniredis reached over an in-memory net.Pipe (miniredis.Dial) and a rueidis
// client whose DialCtxFn returns that pipe: no socket, no real time. Time in
// the bubble is virtual and only advances when every goroutine of the bubble
// is blocked, so a Redis round trip takes zero virtual time and timers fire at
// exactly the instant they were set for. miniredis.ClockTTL(true) makes
// server-side TTLs follow the same virtual clock, so the tests can also look
// at the server's view of the lease.

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/internal/clock"
	"github.com/leasehold/leasehold/internal/scripts"
)

// call is one command sent through a countingClient.
type call struct {
	at  time.Time // virtual time the command was sent
	cmd []string
	err error
}

// countingClient records every command sent with Do (Lua.Exec uses Do), with
// the virtual time it was sent and its outcome.
type countingClient struct {
	rueidis.Client
	mu    sync.Mutex
	calls []call
	n     atomic.Int64 // every call of any method below
}

func (c *countingClient) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.n.Add(1)
	args := slices.Clone(cmd.Commands()) // cmd is recycled by Do
	at := time.Now()
	r := c.Client.Do(ctx, cmd)
	c.mu.Lock()
	c.calls = append(c.calls, call{at: at, cmd: args, err: r.Error()})
	c.mu.Unlock()
	return r
}

func (c *countingClient) DoMulti(ctx context.Context, multi ...rueidis.Completed) []rueidis.RedisResult {
	c.n.Add(1)
	return c.Client.DoMulti(ctx, multi...)
}

func (c *countingClient) Dedicate() (rueidis.DedicatedClient, func()) {
	c.n.Add(1)
	return c.Client.Dedicate()
}

func (c *countingClient) Dedicated(fn func(rueidis.DedicatedClient) error) error {
	c.n.Add(1)
	return c.Client.Dedicated(fn)
}

func (c *countingClient) Nodes() map[string]rueidis.Client {
	c.n.Add(1)
	return c.Client.Nodes()
}

// heartbeats returns the heartbeat attempts of session sid: EVALSHA/EVAL of
// a script whose keys are the lease and the revoked set of sid and that has
// at least one argument (the TTL). CloseLease has the same keys but no
// argument. A NOSCRIPT reply (followed by the EVAL fallback of the same
// attempt) is not counted.
func (c *countingClient) heartbeats(k scripts.Keys, sid string) []call {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []call
	for _, x := range c.calls {
		if len(x.cmd) < 6 || (x.cmd[0] != "EVALSHA" && x.cmd[0] != "EVAL") {
			continue
		}
		// One key, the lease; ARGV[2] the prefix (session_open's is the TTL).
		if x.cmd[2] != "1" || x.cmd[3] != k.Lease(sid) || x.cmd[5] != k.Prefix {
			continue
		}
		if e, ok := rueidis.IsRedisErr(x.err); ok && e.IsNoScript() {
			continue
		}
		out = append(out, x)
	}
	return out
}

// lastOK returns the last successful heartbeat attempt, if any.
func lastOK(beats []call) (call, bool) {
	for i := len(beats) - 1; i >= 0; i-- {
		if beats[i].err == nil {
			return beats[i], true
		}
	}
	return call{}, false
}

// rig is a miniredis server and a counting rueidis client on an in-memory
// connection. Create it inside a synctest bubble: it is closed by t.Cleanup,
// which runs inside the bubble.
type rig struct {
	t     *testing.T
	m     *miniredis.Miniredis
	c     *countingClient
	dials atomic.Int64
}

func newRig(t *testing.T, ttl time.Duration) *rig {
	t.Helper()
	r := &rig{t: t, m: miniredis.NewMiniRedis()}
	r.m.ClockTTL(true) // server TTLs follow the bubble's virtual clock
	t.Cleanup(r.m.Close)
	raw, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:       []string{"miniredis:6379"}, // never dialled: DialCtxFn
		DisableCache:      true,
		ForceSingleClient: true,
		ConnWriteTimeout:  ttl / 2, // what Dial sets
		DialCtxFn: func(context.Context, string, *net.Dialer, *tls.Config) (net.Conn, error) {
			r.dials.Add(1)
			return r.m.Dial()
		},
	})
	if err != nil {
		t.Fatalf("rueidis.NewClient: %v", err)
	}
	t.Cleanup(raw.Close)
	r.c = &countingClient{Client: raw}
	return r
}

// open opens a session on the rig's client; it is closed by t.Cleanup.
func (r *rig) open(o Options) *Session {
	r.t.Helper()
	// Mark the namespace intact, so that the restart grace of a fresh server
	// does not apply (see testutil.InitEpoch).
	ns := o.Namespace
	if ns == "" {
		ns = "leasehold"
	}
	if !r.m.Exists(scripts.NewKeys(ns).Epoch()) {
		if err := r.m.Set(scripts.NewKeys(ns).Epoch(), "0"); err != nil {
			r.t.Fatal(err)
		}
	}
	s, err := New(context.Background(), r.c, o)
	if err != nil {
		r.t.Fatalf("New: %v", err)
	}
	r.t.Cleanup(func() { _ = s.Close() })
	return s
}

func (r *rig) leaseKey(s *Session) string { return s.env.K.Lease(s.ID()) }

func (r *rig) beats(s *Session) []call { return r.c.heartbeats(s.env.K, s.ID()) }

// claimX claims mutex "x" without waiting.
func claimX(t *testing.T, s *Session) *Hold {
	t.Helper()
	h, err := s.Claim(context.Background(), scripts.Resource{Kind: scripts.Mutex, Name: "x"}, false)
	if err != nil {
		t.Fatalf("Claim mutex x: %v", err)
	}
	return h
}

// untilNextBeat advances virtual time to the instant the next heartbeat is
// due (the last confirmed one's send time + Heartbeat, or the session's open
// time + Heartbeat) and lets it run to completion. It returns that instant.
func (r *rig) untilNextBeat(s *Session) time.Time {
	r.t.Helper()
	sent := s.base
	if b, ok := lastOK(r.beats(s)); ok {
		sent = b.at
	}
	due := sent.Add(s.opt.Heartbeat)
	time.Sleep(time.Until(due))
	synctest.Wait()
	return due
}

// wantLeaseLost checks that err is the cause of a lost lease.
func wantLeaseLost(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, ErrLeaseLost) || !errors.Is(err, ErrLost) {
		t.Errorf("%s: cause %v; want an error matching ErrLeaseLost and ErrLost", what, err)
	}
}

// within reports whether a and b are at most tol apart.
func within(a, b time.Time, tol time.Duration) bool {
	d := a.Sub(b)
	return d <= tol && d >= -tol
}

// TestTimingHeartbeatKeepsSessionAlive: with TTL 1s, 30 s of virtual time
// pass with the session alive, its deadline moving forward at every
// heartbeat, one heartbeat per interval, and the lease key present on the
// server (whose TTLs follow the virtual clock).
func TestTimingHeartbeatKeepsSessionAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = time.Second
		r := newRig(t, ttl)
		s := r.open(Options{TTL: ttl})
		h := claimX(t, s)
		if got, want := s.opt.Heartbeat, ttl/3; got != want {
			t.Fatalf("Heartbeat = %v, want the default TTL/3 = %v", got, want)
		}
		start := time.Now()
		if got, want := s.Deadline(), clock.Deadline(start, ttl); !got.Equal(want) {
			t.Fatalf("initial Deadline = start%+v, want start%+v", got.Sub(start), want.Sub(start))
		}

		prev := s.Deadline()
		lastMove := start
		const step = 10 * time.Millisecond
		for time.Since(start) < 30*time.Second {
			time.Sleep(step)
			synctest.Wait()
			now := time.Now()
			if err := s.Err(); err != nil {
				t.Fatalf("at +%v: session ended: %v", now.Sub(start), err)
			}
			if err := h.Err(); err != nil {
				t.Fatalf("at +%v: hold ended: %v", now.Sub(start), err)
			}
			d := s.Deadline()
			if d.Before(prev) {
				t.Fatalf("at +%v: Deadline moved back from +%v to +%v", now.Sub(start), prev.Sub(start), d.Sub(start))
			}
			if d.After(prev) {
				lastMove = now
				prev = d
			}
			if now.Sub(lastMove) > s.opt.Heartbeat+step {
				t.Fatalf("at +%v: Deadline has not moved since +%v (heartbeat %v)", now.Sub(start), lastMove.Sub(start), s.opt.Heartbeat)
			}
			// The session always has at least TTL*0.99 - margin - Heartbeat left.
			if left, min := d.Sub(now), clock.Deadline(now, ttl).Sub(now)-s.opt.Heartbeat; left < min {
				t.Fatalf("at +%v: only %v left before the deadline, want >= %v", now.Sub(start), left, min)
			}
			if !r.m.Exists(r.leaseKey(s)) {
				t.Fatalf("at +%v: lease key %s missing on the server", now.Sub(start), r.leaseKey(s))
			}
			if pttl := r.m.TTL(r.leaseKey(s)); pttl <= d.Sub(now) {
				t.Fatalf("at +%v: server TTL %v does not outlive the local deadline (in %v)", now.Sub(start), pttl, d.Sub(now))
			}
		}
		beats := r.beats(s)
		// One heartbeat per interval: 30s / (1s/3) = 90.
		if n := len(beats); n < 89 || n > 91 {
			t.Errorf("%d heartbeats in 30s with Heartbeat %v, want 90 +-1", n, s.opt.Heartbeat)
		}
		for i, b := range beats {
			if b.err != nil {
				t.Errorf("heartbeat %d at +%v failed: %v", i, b.at.Sub(start), b.err)
			}
			if i > 0 {
				if gap := b.at.Sub(beats[i-1].at); gap != s.opt.Heartbeat {
					t.Errorf("heartbeat %d: %v after the previous one, want exactly %v", i, gap, s.opt.Heartbeat)
				}
			}
		}
		last, _ := lastOK(beats)
		if got, want := s.Deadline(), clock.Deadline(last.at, ttl); !got.Equal(want) {
			t.Errorf("Deadline = last heartbeat%+v, want last heartbeat%+v", got.Sub(last.at), want.Sub(last.at))
		}
	})
}

// TestTimingLossAtDeadline: Redis answers every command with an error right
// after a confirmed heartbeat. The session and its hold end with ErrLeaseLost
// at exactly Deadline() = send time of the last confirmed heartbeat +
// TTL*0.99 - 5ms, while the server-side lease key still has TTL*0.01 + 5ms
// to live.
func TestTimingLossAtDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = time.Second
		r := newRig(t, ttl)
		s := r.open(Options{TTL: ttl})
		h := claimX(t, s)

		r.untilNextBeat(s)
		due := r.untilNextBeat(s)
		last, ok := lastOK(r.beats(s))
		if !ok || !last.at.Equal(due) {
			t.Fatalf("no heartbeat confirmed at +%v (last: %+v)", due.Sub(s.base), last)
		}
		deadline := s.Deadline() // recorded before the outage
		r.m.SetError("ERR outage")
		if want := last.at.Add(ttl - ttl/100 - 5*time.Millisecond); !deadline.Equal(want) {
			t.Fatalf("Deadline = last heartbeat%+v, want last heartbeat%+v (TTL*0.99 - 5ms)",
				deadline.Sub(last.at), want.Sub(last.at))
		}
		if want := clock.Deadline(last.at, ttl); !deadline.Equal(want) {
			t.Fatalf("Deadline = %v, want clock.Deadline = %v", deadline, want)
		}

		select {
		case <-h.Done():
		case <-time.After(2 * ttl):
			t.Fatal("hold not canceled within 2 TTL of an outage")
		}
		lostAt := time.Now()
		if !within(lostAt, deadline, time.Millisecond) {
			t.Errorf("hold canceled at deadline%+v, want at the deadline (+-1ms)", lostAt.Sub(deadline))
		}
		if lostAt.After(deadline.Add(time.Millisecond)) {
			t.Errorf("hold canceled %v after its deadline", lostAt.Sub(deadline))
		}
		// The server must still hold the lease: cancellation comes first.
		if !r.m.Exists(r.leaseKey(s)) {
			t.Errorf("lease key already expired on the server when the hold was canceled")
		} else if pttl, want := r.m.TTL(r.leaseKey(s)), last.at.Add(ttl).Sub(lostAt); pttl != want {
			t.Errorf("server TTL at cancellation = %v, want %v (TTL*0.01 + 5ms)", pttl, want)
		}
		wantLeaseLost(t, "hold", context.Cause(h.Context()))
		wantLeaseLost(t, "hold.Err", h.Err())
		// The order a user may rely on: the session's Err is set before any
		// hold ends for its loss; its Done follows once every hold has ended.
		wantLeaseLost(t, "session.Err when the hold ended", s.Err())
		synctest.Wait()
		select {
		case <-s.Done():
		default:
			t.Fatal("session not ended once the loop had handled the loss")
		}
		wantLeaseLost(t, "session", context.Cause(s.Context()))
		wantLeaseLost(t, "session.Err", s.Err())
		if got := s.Deadline(); !got.Equal(deadline) {
			t.Errorf("Deadline moved during the outage: deadline%+v", got.Sub(deadline))
		}
		// Every attempt after the last confirmed one failed.
		for _, b := range r.beats(s) {
			if b.at.After(last.at) && b.err == nil {
				t.Errorf("heartbeat at +%v succeeded during the outage", b.at.Sub(last.at))
			}
		}

		// The key expires on the server TTL*0.01 + 5ms after the local deadline.
		time.Sleep(time.Until(last.at.Add(ttl)))
		if r.m.Exists(r.leaseKey(s)) {
			t.Errorf("lease key still on the server a TTL after the last heartbeat")
		}

		r.m.SetError("")
		if err := h.Release(context.Background()); !errors.Is(err, ErrLost) {
			t.Errorf("Release after loss = %v, want an error matching ErrLost", err)
		}
		if _, err := s.Claim(context.Background(), scripts.Resource{Kind: scripts.Mutex, Name: "y"}, false); !errors.Is(err, ErrLeaseLost) {
			t.Errorf("Claim after loss = %v, want an error matching ErrLeaseLost", err)
		}
		if err := s.Close(); err != nil {
			t.Errorf("Close after loss = %v, want nil", err)
		}
	})
}

// TestTimingLossAtDeadlineStalled: like TestTimingLossAtDeadline, but Redis
// stops answering at all (every command hangs on the server, the connection
// stays open) instead of answering with errors: heartbeats hang (rueidis
// gives up on one after ConnWriteTimeout, the retry hangs again), and the
// deadline timer ends the session at exactly Deadline().
func TestTimingLossAtDeadlineStalled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = time.Second
		r := newRig(t, ttl)
		s := r.open(Options{TTL: ttl})
		h := claimX(t, s)

		r.untilNextBeat(s)
		last, ok := lastOK(r.beats(s))
		if !ok {
			t.Fatal("no heartbeat confirmed")
		}
		deadline := s.Deadline()
		if want := clock.Deadline(last.at, ttl); !deadline.Equal(want) {
			t.Fatalf("Deadline = last heartbeat%+v, want %+v", deadline.Sub(last.at), want.Sub(last.at))
		}
		release := r.stallRedis()
		defer release()

		select {
		case <-h.Done():
		case <-time.After(2 * ttl):
			t.Fatal("hold not canceled within 2 TTL of a stall")
		}
		lostAt := time.Now()
		if !within(lostAt, deadline, time.Millisecond) {
			t.Errorf("hold canceled at deadline%+v, want at the deadline (+-1ms)", lostAt.Sub(deadline))
		}
		if !r.m.Exists(r.leaseKey(s)) {
			t.Errorf("lease key already expired on the server when the hold was canceled")
		}
		wantLeaseLost(t, "hold", context.Cause(h.Context()))
		wantLeaseLost(t, "session", s.Err())
		if got := s.Deadline(); !got.Equal(deadline) {
			t.Errorf("Deadline moved during the stall: deadline%+v", got.Sub(deadline))
		}
		// How long Close takes here is TestTimingCloseBoundedWhenRedisHangs'
		// business; it must still report nil for a session lost before it.
		if err := s.Close(); err != nil {
			t.Errorf("Close after loss = %v, want nil", err)
		}
		release()
	})
}

// stallRedis makes every command hang on the server (the connection stays
// open, nothing is answered) until the returned function is called.
func (r *rig) stallRedis() (resume func()) {
	stall := make(chan struct{})
	var once sync.Once
	r.m.Server().SetPreHook(func(*server.Peer, string, ...string) bool {
		<-stall
		return false
	})
	resume = func() { once.Do(func() { close(stall) }) }
	r.t.Cleanup(resume) // runs before the miniredis Close registered earlier
	return resume
}

// TestTimingCloseBoundedWhenRedisHangs: Session.Close documents "Close is
// bounded by the TTL: if Redis does not answer, the lease and holds expire on
// their own". With Redis hanging (connection open, no reply) Close must cancel
// the holds at once and return within the TTL, whether the session is still
// alive or was lost before Close.
func TestTimingCloseBoundedWhenRedisHangs(t *testing.T) {
	const ttl = time.Second
	t.Run("live", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, ttl)
			s := r.open(Options{TTL: ttl})
			h := claimX(t, s)
			r.untilNextBeat(s)
			resume := r.stallRedis()
			defer resume()

			start := time.Now()
			canceled := make(chan time.Time, 1)
			go func() { <-h.Done(); canceled <- time.Now() }()
			err := s.Close()
			took := time.Since(start)
			if at := <-canceled; !at.Equal(start) {
				t.Errorf("hold canceled %v after Close was called, want at once", at.Sub(start))
			}
			if !errors.Is(context.Cause(h.Context()), ErrClosed) {
				t.Errorf("hold cause = %v, want ErrClosed", context.Cause(h.Context()))
			}
			if err == nil {
				t.Errorf("Close with Redis hanging = nil, want the cleanup error")
			}
			if took > ttl {
				t.Errorf("Close took %v with Redis hanging, want <= TTL %v", took, ttl)
			}
		})
	})
	t.Run("heartbeat in flight", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, ttl)
			s := r.open(Options{TTL: ttl})
			h := claimX(t, s)
			due := r.untilNextBeat(s).Add(s.opt.Heartbeat)
			resume := r.stallRedis()
			defer resume()
			time.Sleep(time.Until(due.Add(50 * time.Millisecond))) // the next heartbeat hangs
			synctest.Wait()

			start := time.Now()
			err := s.Close()
			took := time.Since(start)
			if !errors.Is(context.Cause(h.Context()), ErrClosed) {
				t.Errorf("hold cause = %v, want ErrClosed", context.Cause(h.Context()))
			}
			if err == nil {
				t.Errorf("Close with Redis hanging = nil, want the cleanup error")
			}
			if took > ttl {
				t.Errorf("Close took %v with Redis hanging and a heartbeat in flight, want <= TTL %v", took, ttl)
			}
		})
	})
	t.Run("after loss", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, ttl)
			s := r.open(Options{TTL: ttl})
			claimX(t, s)
			r.untilNextBeat(s)
			resume := r.stallRedis()
			defer resume()

			<-s.Done()
			lostAt := time.Now()
			wantLeaseLost(t, "session", s.Err())
			if err := s.Close(); err != nil {
				t.Errorf("Close after loss = %v, want nil", err)
			}
			if took := time.Since(lostAt); took > ttl {
				t.Errorf("Close after loss took %v with Redis hanging, want <= TTL %v", took, ttl)
			}
		})
	})
}

// TestTimingDeadlineFromSendTime: with every script reply delayed by 100ms,
// a confirmed heartbeat moves the deadline to its send time (not its reply
// time) + TTL*0.99 - 5ms, the deadline moves only when the reply arrives, and
// heartbeats stay one Heartbeat apart (scheduled from their send times).
func TestTimingDeadlineFromSendTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = time.Second
		const latency = 100 * time.Millisecond
		r := newRig(t, ttl)
		s := r.open(Options{TTL: ttl})
		h := claimX(t, s)
		// The first heartbeat loads the script (EVALSHA, NOSCRIPT, EVAL): let
		// it run without latency so that every later one is one round trip.
		r.untilNextBeat(s)
		r.m.Server().SetPreHook(func(_ *server.Peer, cmd string, _ ...string) bool {
			// The hook also sees the redis.call()s of a script: delay only
			// the script itself, so that it costs one latency.
			if cmd == "EVALSHA" || cmd == "EVAL" {
				time.Sleep(latency) // virtual: the server goroutine is in the bubble
			}
			return false
		})
		t.Cleanup(func() { r.m.Server().SetPreHook(nil) })

		for i := range 10 {
			before := s.Deadline()
			sent := before.Add(-(clock.Deadline(time.Time{}, ttl).Sub(time.Time{}))) // last send time
			due := sent.Add(s.opt.Heartbeat)
			time.Sleep(time.Until(due))
			synctest.Wait()
			if got := s.Deadline(); !got.Equal(before) {
				t.Fatalf("beat %d: Deadline moved before the reply arrived", i)
			}
			time.Sleep(latency)
			synctest.Wait()
			got := s.Deadline()
			if want := clock.Deadline(due, ttl); !got.Equal(want) {
				t.Fatalf("beat %d: Deadline = send%+v, want send%+v (from the send time, not the reply)",
					i, got.Sub(due), want.Sub(due))
			}
			b, ok := lastOK(r.beats(s))
			if !ok || !b.at.Equal(due) {
				t.Fatalf("beat %d: last confirmed heartbeat sent at %v, want %v", i, b.at, due)
			}
		}
		if err := h.Err(); err != nil {
			t.Fatalf("hold ended: %v", err)
		}
		if err := s.Err(); err != nil {
			t.Fatalf("session ended: %v", err)
		}
	})
}

// TestTimingNewNotPastDeadline: New must not return a session whose lease
// deadline has already passed. Here the first lease grant takes 990ms with
// TTL 1s: its reply arrives after sent + TTL*0.99 - 5ms = 985ms but within
// the TTL that open() uses as its timeout.
func TestTimingNewNotPastDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = time.Second
		r := newRig(t, ttl)
		r.m.Server().SetPreHook(func(_ *server.Peer, cmd string, _ ...string) bool {
			if cmd == "EVALSHA" || cmd == "EVAL" { // EVALSHA (NOSCRIPT) + EVAL: 990ms
				time.Sleep(495 * time.Millisecond)
			}
			return false
		})
		start := time.Now()
		s, err := New(context.Background(), r.c, Options{TTL: ttl})
		if err != nil {
			return // refusing is fine
		}
		defer s.Close()
		if now := time.Now(); !s.Deadline().After(now) {
			t.Errorf("New took %v and returned a session with Err() = %v whose Deadline passed %v ago",
				now.Sub(start), s.Err(), now.Sub(s.Deadline()))
		}
	})
}

// TestTimingRetriesWithBackoff: an outage shorter than the time left before
// the deadline is survived. During it the heartbeat is retried more than once
// but with backoff, not in a tight loop; after it the deadline moves forward
// again well before it would have passed.
func TestTimingRetriesWithBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = time.Second
		const outage = 600 * time.Millisecond // < TTL*0.99 - 5ms = 985ms
		r := newRig(t, ttl)
		s := r.open(Options{TTL: ttl})
		h := claimX(t, s)

		confirmed := r.untilNextBeat(s)
		before := s.Deadline()
		r.m.SetError("ERR outage")
		time.Sleep(outage)
		synctest.Wait()
		r.m.SetError("")
		cleared := time.Now()
		if err := s.Err(); err != nil {
			t.Fatalf("session ended during a %v outage: %v", outage, err)
		}
		if got := s.Deadline(); !got.Equal(before) {
			t.Fatalf("Deadline moved during the outage: %+v", got.Sub(before))
		}

		var failed []call
		for _, b := range r.beats(s) {
			if b.at.After(confirmed) && b.err != nil {
				failed = append(failed, b)
			}
		}
		if len(failed) < 2 {
			t.Errorf("%d failed heartbeat attempts during a %v outage, want retries (>= 2)", len(failed), outage)
		}
		// Backoff: InitialInterval min(Heartbeat/10, 50ms) = 33ms, randomized
		// by +-50%: no two attempts closer than ~16ms.
		minGap := s.opt.Heartbeat / 10 / 2
		for i := 1; i < len(failed); i++ {
			if gap := failed[i].at.Sub(failed[i-1].at); gap < minGap-time.Millisecond {
				t.Errorf("retry %d only %v after the previous attempt, want >= %v", i, gap, minGap)
			}
		}
		if n := countIn(failed, cleared.Add(-500*time.Millisecond), cleared); n >= 50 {
			t.Errorf("%d attempts in 500ms: a tight loop", n)
		}
		t.Logf("failed attempts during the outage at: %v", offsets(failed, confirmed))

		// Recovery: the next retry succeeds and moves the deadline forward,
		// within one maximal backoff (Heartbeat/2 * 1.5) of the end of the outage.
		maxBackoff := s.opt.Heartbeat / 2 * 3 / 2
		for time.Since(cleared) <= maxBackoff && !s.Deadline().After(before) {
			time.Sleep(time.Millisecond)
			synctest.Wait()
		}
		after := s.Deadline()
		if !after.After(before) {
			t.Fatalf("Deadline did not move within %v after the outage ended", maxBackoff)
		}
		recovered, _ := lastOK(r.beats(s))
		if recovered.at.Before(cleared) || !after.Equal(clock.Deadline(recovered.at, ttl)) {
			t.Errorf("Deadline after recovery = %v, want clock.Deadline(%v)", after, recovered.at)
		}
		if !recovered.at.Before(before) {
			t.Errorf("recovered at %v, after the old deadline %v", recovered.at, before)
		}
		if err := s.Err(); err != nil {
			t.Fatalf("session ended: %v", err)
		}
		if err := h.Err(); err != nil {
			t.Fatalf("hold ended: %v", err)
		}

		// Back to the regular interval: the next beats are Heartbeat apart and
		// the session lives on for several TTLs.
		n := len(r.beats(s))
		time.Sleep(3 * ttl)
		synctest.Wait()
		if err := s.Err(); err != nil {
			t.Fatalf("session ended after recovery: %v", err)
		}
		if got := len(r.beats(s)) - n; got < 8 || got > 10 {
			t.Errorf("%d heartbeats in 3 TTL after recovery, want 9 +-1", got)
		}
	})
}

func countIn(cs []call, from, to time.Time) int {
	n := 0
	for _, c := range cs {
		if !c.at.Before(from) && !c.at.After(to) {
			n++
		}
	}
	return n
}

func offsets(cs []call, origin time.Time) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = "+" + c.at.Sub(origin).String()
	}
	return out
}

// TestTimingLeaseDeletedOnServer: a session whose lease key disappears from
// the server ends with ErrLeaseLost at its next heartbeat, within one
// Heartbeat interval, and so does its hold; the mutex is then free for
// another session.
func TestTimingLeaseDeletedOnServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = time.Second
		r := newRig(t, ttl)
		s := r.open(Options{TTL: ttl})
		h := claimX(t, s)
		r.untilNextBeat(s)
		time.Sleep(100 * time.Millisecond) // somewhere between two heartbeats
		synctest.Wait()

		if !r.m.Del(r.leaseKey(s)) {
			t.Fatalf("lease key %s not found", r.leaseKey(s))
		}
		deleted := time.Now()
		select {
		case <-h.Done():
		case <-time.After(ttl):
			t.Fatal("hold not canceled within a TTL of its lease being deleted")
		}
		lostAt := time.Now()
		if d := lostAt.Sub(deleted); d > s.opt.Heartbeat {
			t.Errorf("hold canceled %v after the lease was deleted, want within one Heartbeat (%v)", d, s.opt.Heartbeat)
		}
		if lostAt.After(s.Deadline()) {
			t.Errorf("hold canceled after the local deadline")
		}
		beats := r.beats(s)
		if b := beats[len(beats)-1]; !b.at.Equal(lostAt) || b.err != nil {
			t.Errorf("last heartbeat at %v (err %v); want it to be the one that found the lease gone, at %v", b.at, b.err, lostAt)
		}
		wantLeaseLost(t, "hold", context.Cause(h.Context()))
		// Before the local deadline: only the cause the loop stored before
		// ending the hold can make Err report the loss here.
		wantLeaseLost(t, "session.Err when the hold ended", s.Err())

		// The loss is final; another session gets the mutex.
		synctest.Wait()
		if _, err := s.Claim(context.Background(), scripts.Resource{Kind: scripts.Mutex, Name: "y"}, false); !errors.Is(err, ErrLeaseLost) {
			t.Errorf("Claim after loss = %v, want an error matching ErrLeaseLost", err)
		}
		s2 := r.open(Options{TTL: ttl})
		h2 := claimX(t, s2)
		if h2.Token() <= h.Token() {
			t.Errorf("new token %d not above the lost hold's %d", h2.Token(), h.Token())
		}
		if err := s.Close(); err != nil {
			t.Errorf("Close after loss = %v, want nil", err)
		}
	})
}

// acquires returns the mutex acquire attempts of session sid's holds.
func (c *countingClient) acquires(k scripts.Keys, sid string) []call {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []call
	for _, x := range c.calls {
		if len(x.cmd) < 6 || (x.cmd[0] != "EVALSHA" && x.cmd[0] != "EVAL") || x.cmd[3] != k.Mutex("x") {
			continue
		}
		if e, ok := rueidis.IsRedisErr(x.err); ok && e.IsNoScript() {
			continue
		}
		// Acquire has 2 keys (the mutex, the caller's lease) and 2
		// arguments: the hold id "<sid>.<n>" and the options,
		// "<queue><sharded><held>|<ld>|<i>"; release has 1 key.
		if x.cmd[2] == "2" && len(x.cmd) == 7 && x.cmd[4] == k.Lease(sid) && strings.HasPrefix(x.cmd[5], sid+".") {
			out = append(out, x)
		}
	}
	return out
}

type claimResult struct {
	h   *Hold
	err error
	at  time.Time
}

func claimAsync(s *Session) <-chan claimResult {
	ch := make(chan claimResult, 1)
	go func() {
		h, err := s.Claim(context.Background(), scripts.Resource{Kind: scripts.Mutex, Name: "x"}, true)
		ch <- claimResult{h, err, time.Now()}
	}()
	return ch
}

// TestTimingWaiterHandOff: a session waiting for a held mutex gets it at the
// very instant the holder releases it (hand-off in the release script plus a
// notification: no polling), and while it waits it sends only a few
// fallback re-checks (about one per holder TTL), not a poll.
func TestTimingWaiterHandOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = time.Second
		r := newRig(t, ttl)
		s1 := r.open(Options{TTL: ttl})
		s2 := r.open(Options{TTL: ttl})
		h1 := claimX(t, s1)

		res := claimAsync(s2)
		const wait = 3 * time.Second
		time.Sleep(wait)
		synctest.Wait()
		select {
		case c := <-res:
			t.Fatalf("waiter returned while the mutex was held: %v, %v", c.h, c.err)
		default:
		}
		if n := len(r.c.acquires(s2.env.K, s2.ID())); n < 1 || n > int(wait/(ttl*2/3))+2 {
			t.Errorf("waiter sent %d acquire attempts in %v, want 1 plus about one re-check per holder TTL", n, wait)
		}
		if err := s1.Err(); err != nil {
			t.Fatalf("holder session ended: %v", err)
		}
		if err := s2.Err(); err != nil {
			t.Fatalf("waiter session ended: %v", err)
		}

		released := time.Now()
		if err := h1.Release(context.Background()); err != nil {
			t.Fatalf("Release: %v", err)
		}
		c := <-res
		if c.err != nil {
			t.Fatalf("waiter: %v", c.err)
		}
		if !c.at.Equal(released) {
			t.Errorf("waiter got the mutex %v after the release, want at the same instant", c.at.Sub(released))
		}
		if c.h.Token() <= h1.Token() {
			t.Errorf("hand-off token %d not above %d", c.h.Token(), h1.Token())
		}
		if got := mutexHolder(r, s2.env.K.Mutex("x")); !strings.HasPrefix(got, s2.ID()+".") {
			t.Errorf("mutex holder on the server = %q, want a hold of the waiter %s", got, s2.ID())
		}
		if !errors.Is(context.Cause(h1.Context()), ErrReleased) {
			t.Errorf("released hold cause = %v, want ErrReleased", context.Cause(h1.Context()))
		}
	})
}

// TestTimingWaiterStopsOnLeaseLoss: a waiter whose own session loses its
// lease stops waiting at that instant with ErrLeaseLost; its queue entry is
// then skipped, so the mutex is free for others once released.
func TestTimingWaiterStopsOnLeaseLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = time.Second
		r := newRig(t, ttl)
		s1 := r.open(Options{TTL: ttl})
		s2 := r.open(Options{TTL: ttl})
		h1 := claimX(t, s1)

		res := claimAsync(s2)
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if !r.m.Del(r.leaseKey(s2)) {
			t.Fatal("waiter's lease key not found")
		}
		deleted := time.Now()
		var c claimResult
		select {
		case c = <-res:
		case <-time.After(ttl):
			t.Fatal("waiter still waiting a TTL after its lease was deleted")
		}
		<-s2.Done()
		wantLeaseLost(t, "waiting Claim", c.err)
		wantLeaseLost(t, "waiter session", s2.Err())
		if c.h != nil {
			t.Errorf("waiting Claim returned a hold with its error")
		}
		if d := c.at.Sub(deleted); d > s2.opt.Heartbeat {
			t.Errorf("waiter stopped %v after its lease was deleted, want within one Heartbeat %v", d, s2.opt.Heartbeat)
		}
		// The session's loss and the waiter's return are the same instant.
		lost := r.beats(s2)
		if last := lost[len(lost)-1]; !last.at.Equal(c.at) {
			t.Errorf("waiter returned at +%v, the heartbeat that found the lease gone ran at +%v",
				c.at.Sub(deleted), last.at.Sub(deleted))
		}

		// The dead waiter is skipped: after the release the mutex is free.
		if err := h1.Release(context.Background()); err != nil {
			t.Fatalf("Release: %v", err)
		}
		if got := mutexHolder(r, s1.env.K.Mutex("x")); got != "" {
			t.Errorf("mutex handed to %q after release, want free (the only waiter is dead)", got)
		}
		s3 := r.open(Options{TTL: ttl})
		claimX(t, s3)
	})
}

// TestTimingClose: Close cancels holds with ErrClosed, releases them and
// deletes the lease in Redis, returns nil, is idempotent, and later calls
// fail with ErrClosed.
func TestTimingClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = time.Second
		r := newRig(t, ttl)
		s := r.open(Options{TTL: ttl})
		h := claimX(t, s)
		r.untilNextBeat(s)
		lease := r.leaseKey(s)
		mkey := s.env.K.Mutex("x")
		if !r.m.Exists(lease) {
			t.Fatal("lease key missing before Close")
		}
		if got := mutexHolder(r, mkey); got == "" {
			t.Fatal("mutex x not held before Close")
		}

		start := time.Now()
		if err := s.Close(); err != nil {
			t.Fatalf("Close = %v, want nil", err)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("Close took %v of virtual time with Redis answering at once", d)
		}
		select {
		case <-h.Done():
		default:
			t.Fatal("hold not canceled by Close")
		}
		if c := context.Cause(h.Context()); !errors.Is(c, ErrClosed) {
			t.Errorf("hold cause = %v, want ErrClosed", c)
		}
		if errors.Is(h.Err(), ErrLost) {
			t.Errorf("hold ended by Close matches ErrLost: %v", h.Err())
		}
		if c := context.Cause(s.Context()); !errors.Is(c, ErrClosed) {
			t.Errorf("session cause = %v, want ErrClosed", c)
		}
		if !errors.Is(s.Err(), ErrClosed) {
			t.Errorf("session Err = %v, want ErrClosed", s.Err())
		}
		if r.m.Exists(lease) {
			t.Errorf("lease key %s still exists after Close", lease)
		}
		if got := mutexHolder(r, mkey); got != "" {
			t.Errorf("mutex x still held by %q after Close", got)
		}
		if err := s.Close(); err != nil {
			t.Errorf("second Close = %v, want nil", err)
		}
		if err := h.Release(context.Background()); err != nil {
			t.Errorf("Release of a hold ended by Close = %v, want nil", err)
		}
		if _, err := s.Claim(context.Background(), scripts.Resource{Kind: scripts.Mutex, Name: "x"}, false); !errors.Is(err, ErrClosed) {
			t.Errorf("Claim after Close = %v, want ErrClosed", err)
		}
		if _, err := s.Claim(context.Background(), scripts.Resource{Kind: scripts.Mutex, Name: "x"}, true); !errors.Is(err, ErrClosed) {
			t.Errorf("waiting Claim after Close = %v, want ErrClosed", err)
		}
		// No heartbeat after Close.
		n := len(r.beats(s))
		time.Sleep(3 * ttl)
		synctest.Wait()
		if got := len(r.beats(s)); got != n {
			t.Errorf("%d heartbeats after Close", got-n)
		}

		// The mutex is free for someone else right away.
		s2 := r.open(Options{TTL: ttl})
		h2 := claimX(t, s2)
		if h2.Token() <= h.Token() {
			t.Errorf("new token %d not above the closed hold's %d", h2.Token(), h.Token())
		}
	})
}

// TestTimingCloseRedisDown: Close while Redis answers only errors still
// cancels the holds with ErrClosed at once, returns the cleanup error, and
// stays idempotent.
func TestTimingCloseRedisDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = time.Second
		r := newRig(t, ttl)
		s := r.open(Options{TTL: ttl})
		h := claimX(t, s)
		r.untilNextBeat(s)
		r.m.SetError("ERR outage")

		start := time.Now()
		err := s.Close()
		if err == nil {
			t.Errorf("Close with Redis failing = nil, want the cleanup error")
		}
		if d := time.Since(start); d > ttl {
			t.Errorf("Close took %v, want <= TTL", d)
		}
		if !errors.Is(context.Cause(h.Context()), ErrClosed) {
			t.Errorf("hold cause = %v, want ErrClosed", context.Cause(h.Context()))
		}
		if err2 := s.Close(); err2 != err {
			t.Errorf("second Close = %v, want the same result %v", err2, err)
		}
		r.m.SetError("")
	})
}

// TestOptionsValidation checks defaults and that every invalid Options value
// is rejected with ErrInvalidOptions, by New without sending anything to
// Redis and by Dial without dialling.
func TestOptionsValidation(t *testing.T) {
	t.Run("defaults", func(t *testing.T) {
		o, err := Options{}.WithDefaults()
		if err != nil {
			t.Fatalf("withDefaults: %v", err)
		}
		if o.Namespace != "leasehold" {
			t.Errorf("Namespace = %q, want leasehold", o.Namespace)
		}
		if o.TTL != 10*time.Second {
			t.Errorf("TTL = %v, want 10s", o.TTL)
		}
		if o.Heartbeat != o.TTL/3 {
			t.Errorf("Heartbeat = %v, want TTL/3 = %v", o.Heartbeat, o.TTL/3)
		}
		if o.Owner == "" || !strings.Contains(o.Owner, "/") {
			t.Errorf("Owner = %q, want hostname/pid", o.Owner)
		}
		if o.RestartGrace != o.TTL {
			t.Errorf("RestartGrace = %v, want TTL", o.RestartGrace)
		}
		if o.ReplicaAckTimeout != o.Heartbeat {
			t.Errorf("ReplicaAckTimeout = %v, want Heartbeat", o.ReplicaAckTimeout)
		}
		if o.Logger == nil {
			t.Errorf("Logger = nil, want a discarding logger")
		}

		o, err = Options{TTL: time.Second, Owner: "me", Namespace: "ns"}.WithDefaults()
		if err != nil {
			t.Fatalf("withDefaults: %v", err)
		}
		if o.Heartbeat != time.Second/3 || o.Owner != "me" || o.Namespace != "ns" {
			t.Errorf("got Heartbeat %v Owner %q Namespace %q; want 333.333333ms, me, ns", o.Heartbeat, o.Owner, o.Namespace)
		}
	})

	valid := []Options{
		{TTL: minTTL},
		{TTL: time.Second, Heartbeat: time.Second / 2},
		{TTL: time.Second, Heartbeat: time.Millisecond},
		{LockDelay: time.Millisecond, ReplicaAck: 1, ReplicaAckTimeout: time.Millisecond},
		{Namespace: strings.Repeat("n", maxNamespaceLen)},
		{LockDelay: time.Second},
	}
	for _, o := range valid {
		if _, err := o.WithDefaults(); err != nil {
			t.Errorf("withDefaults(%+v) = %v, want valid", o, err)
		}
	}

	invalid := []struct {
		name string
		o    Options
	}{
		{"namespace with {", Options{Namespace: "a{b"}},
		{"namespace with }", Options{Namespace: "a}b"}},
		{"namespace too long", Options{Namespace: strings.Repeat("n", maxNamespaceLen+1)}},
		{"negative TTL", Options{TTL: -time.Second}},
		{"TTL below 50ms", Options{TTL: 49 * time.Millisecond}},
		{"TTL 1ns", Options{TTL: time.Nanosecond}},
		{"Heartbeat above TTL/2", Options{TTL: time.Second, Heartbeat: time.Second/2 + time.Nanosecond}},
		{"Heartbeat equal to TTL", Options{TTL: time.Second, Heartbeat: time.Second}},
		{"Heartbeat above default TTL/2", Options{Heartbeat: 6 * time.Second}},
		{"negative Heartbeat", Options{Heartbeat: -time.Millisecond}},
		{"TTL above the maximum", Options{TTL: MaxDuration + time.Millisecond}},
		{"TTL of 200 years", Options{TTL: 200 * 365 * 24 * time.Hour}},
		{"Heartbeat under 1ms", Options{TTL: time.Second, Heartbeat: time.Millisecond - 1}},
		{"Heartbeat 1ns", Options{TTL: time.Second, Heartbeat: time.Nanosecond}},
		{"negative LockDelay", Options{LockDelay: -time.Millisecond}},
		{"LockDelay under 1ms", Options{LockDelay: 500 * time.Microsecond}},
		{"ReplicaAckTimeout under 1ms", Options{ReplicaAck: 1, ReplicaAckTimeout: 500 * time.Microsecond}},
		{"LockDelay above the maximum", Options{LockDelay: MaxDuration + time.Millisecond}},
		{"negative RestartGrace", Options{RestartGrace: -time.Millisecond}},
		{"RestartGrace above the maximum", Options{RestartGrace: MaxDuration + time.Millisecond}},
		{"negative ReplicaAck", Options{ReplicaAck: -1}},
		{"ReplicaAckTimeout above TTL/2", Options{TTL: time.Second, ReplicaAckTimeout: 600 * time.Millisecond}},
		{"RestartGrace below TTL", Options{TTL: time.Second, RestartGrace: 500 * time.Millisecond}},
		{"negative ReplicaAckTimeout", Options{ReplicaAckTimeout: -time.Millisecond}},
	}

	// A real client on an in-memory miniredis, counting what reaches it.
	m := miniredis.NewMiniRedis()
	t.Cleanup(m.Close)
	var dials atomic.Int64
	dial := func(context.Context, string, *net.Dialer, *tls.Config) (net.Conn, error) {
		dials.Add(1)
		return m.Dial()
	}
	raw, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:       []string{"miniredis:6379"},
		DisableCache:      true,
		ForceSingleClient: true,
		DialCtxFn:         dial,
	})
	if err != nil {
		t.Fatalf("rueidis.NewClient: %v", err)
	}
	t.Cleanup(raw.Close)
	cc := &countingClient{Client: raw}
	before := m.CommandCount()
	dialsBefore := dials.Load()

	for _, tc := range invalid {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.o.WithDefaults(); !errors.Is(err, ErrInvalidOptions) {
				t.Errorf("withDefaults = %v, want ErrInvalidOptions", err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			s, err := New(ctx, cc, tc.o)
			if !errors.Is(err, ErrInvalidOptions) {
				t.Errorf("New = %v, want ErrInvalidOptions", err)
			}
			if s != nil {
				t.Errorf("New returned a session with an error")
				_ = s.Close()
			}
			s, err = Dial(ctx, rueidis.ClientOption{
				InitAddress:       []string{"miniredis:6379"},
				ForceSingleClient: true,
				DialCtxFn:         dial,
			}, tc.o)
			if !errors.Is(err, ErrInvalidOptions) {
				t.Errorf("Dial = %v, want ErrInvalidOptions", err)
			}
			if s != nil {
				t.Errorf("Dial returned a session with an error")
				_ = s.Close()
			}
		})
	}
	if n := cc.n.Load(); n != 0 {
		t.Errorf("New with invalid options made %d client calls, want 0", n)
	}
	if n := m.CommandCount() - before; n != 0 {
		t.Errorf("New with invalid options sent %d commands to Redis, want 0", n)
	}
	if n := dials.Load() - dialsBefore; n != 0 {
		t.Errorf("Dial with invalid options dialled %d times, want 0", n)
	}
	if keys := m.Keys(); len(keys) != 0 {
		t.Errorf("keys in Redis after invalid options: %v", keys)
	}

	// Sanity check of the counters: a valid New does reach Redis.
	s, err := New(context.Background(), cc, Options{TTL: time.Second, Namespace: "ok"})
	if err != nil {
		t.Fatalf("New with valid options: %v", err)
	}
	if cc.n.Load() == 0 || m.CommandCount() == before {
		t.Errorf("counters did not see a valid New")
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// TestTimingShutdownRunsLatePosts: a release posted after the loop decided
// to exit (a Claim rolling back a grant as its session is lost) is run by
// the shutdown, not dropped with the request buffer.
func TestTimingShutdownRunsLatePosts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = time.Second
		r := newRig(t, ttl)
		s := r.open(Options{TTL: ttl})
		// A grant the client never registered, as one it rolls back.
		res := scripts.Resource{Kind: scripts.Mutex, Name: "x"}
		hid := s.newHoldID()
		g, err := s.env.Acquire(context.Background(), res, hid, false)
		if err != nil || g.Status != scripts.Granted {
			t.Fatalf("Acquire: %+v, %v", g, err)
		}
		// Hold the loop, then queue the loss and, behind it, the release.
		block := make(chan struct{})
		if !s.post(func(*loop) { <-block }) {
			t.Fatal("post refused")
		}
		s.post(func(l *loop) { l.lose(errors.New("test: lost")) })
		s.post(func(l *loop) { l.release(pendingRelease{r: res, hid: hid}) })
		close(block)
		<-s.exited
		if got := mutexHolder(r, s.env.K.Mutex("x")); got == hid {
			t.Fatalf("mutex still recorded for %s after the session's shutdown: the late release was dropped", hid)
		}
	})
}

// mutexHolder returns the hold id holding mutex key on r's miniredis (the
// first field of the mutex string, see internal/scripts/mutex_lib.lua), or "".
func mutexHolder(r *rig, key string) string {
	v, _ := r.m.Get(key)
	hid, _, _ := strings.Cut(v, "|")
	return hid
}
