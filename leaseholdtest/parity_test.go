package leaseholdtest_test

// The kit's faults against real Redis: every scenario runs once on the kit
// and once on a real redis-server faulted the way the kit's helpers emulate
// (Pause: SIGSTOP/SIGCONT; RestartEmpty: SIGKILL and a restart without
// persistence; the reset helpers: the same operator call from a session of
// its own), and both runs must give the same outcome, which must also be the
// one the kit documents.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/election"
	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/mutex"
	"github.com/leasehold/leasehold/pool"
	"github.com/leasehold/leasehold/rwmutex"
	"github.com/leasehold/leasehold/semaphore"
	"github.com/leasehold/leasehold/session"
)

// backend is where a scenario runs.
type backend struct {
	ns            string
	open          func(t *testing.T, o session.Options) *session.Session
	clientOption  rueidis.ClientOption // for a session of the test's own
	probe         rueidis.Client       // reads the server's view (PEXPIRETIME)
	pause, resume func()
	restartEmpty  func(t *testing.T)
	resetMutex    func(t *testing.T, name string)
	resetElection func(t *testing.T, name string)
	resetRWMutex  func(t *testing.T, name string)
	resetSem      func(t *testing.T, name string)
	resetPool     func(t *testing.T, name string)
	removeMember  func(t *testing.T, pool, member string)
}

func kitBackend(t *testing.T) backend {
	ns := redistest.Namespace(t)
	srv := leaseholdtest.New(t, leaseholdtest.WithNamespace(ns))
	return backend{
		ns:            ns,
		open:          func(t *testing.T, o session.Options) *session.Session { return srv.Session(t, o) },
		clientOption:  srv.ClientOption(),
		probe:         srv.Client(t),
		pause:         srv.Pause,
		resume:        srv.Resume,
		restartEmpty:  func(t *testing.T) { srv.RestartEmpty(t) },
		resetMutex:    func(t *testing.T, name string) { srv.ResetMutex(t, name) },
		resetElection: func(t *testing.T, name string) { srv.ResetElection(t, name) },
		resetRWMutex:  func(t *testing.T, name string) { srv.ResetRWMutex(t, name) },
		resetSem:      func(t *testing.T, name string) { srv.ResetSemaphore(t, name) },
		resetPool:     func(t *testing.T, name string) { srv.ResetPool(t, name) },
		removeMember:  func(t *testing.T, p, m string) { srv.RemovePoolMember(t, p, m) },
	}
}

// redisBackend opens sessions as the kit does (Dial with the kit's default
// TTL and a RestartGrace of the TTL, the namespace marked intact until the
// first restart).
func redisBackend(t *testing.T) backend {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	restarted := false
	open := func(t *testing.T, o session.Options) *session.Session {
		t.Helper()
		if !restarted {
			testutil.InitEpoch(t, srv.Addr(), ns)
		}
		if o.TTL == 0 {
			o.TTL = leaseholdtest.DefaultTTL
		}
		if o.RestartGrace == 0 {
			o.RestartGrace = o.TTL
		}
		o.Namespace = ns
		opt := testutil.ClientOption(srv.Addr())
		opt.ConnWriteTimeout = 0 // Dial sets TTL/2, as for the kit's sessions
		s, err := session.Dial(testutil.Ctx(t, 10*time.Second), opt, o)
		if err != nil {
			t.Fatalf("session.Dial: %v", err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	operate := func(t *testing.T, f func(ctx context.Context, op *session.Session) error) {
		t.Helper()
		op := open(t, session.Options{})
		defer op.Close()
		if err := f(testutil.Ctx(t, 10*time.Second), op); err != nil {
			t.Fatalf("operator: %v", err)
		}
	}
	taken := func(ok bool, err error) error {
		if err == nil && !ok {
			return errors.New("no live hold to take away")
		}
		return err
	}
	return backend{
		ns:           ns,
		open:         open,
		clientOption: testutil.ClientOption(srv.Addr()),
		probe:        testutil.Client(t, srv.Addr()),
		pause:        srv.Stop,
		resume:       srv.Cont,
		restartEmpty: func(t *testing.T) {
			srv.Kill()
			srv.Restart()
			restarted = true
		},
		resetMutex: func(t *testing.T, name string) {
			operate(t, func(ctx context.Context, op *session.Session) error { return taken(mutex.New(op, name).Reset(ctx)) })
		},
		resetElection: func(t *testing.T, name string) {
			operate(t, func(ctx context.Context, op *session.Session) error { return taken(election.New(op, name).Reset(ctx)) })
		},
		resetRWMutex: func(t *testing.T, name string) {
			operate(t, func(ctx context.Context, op *session.Session) error {
				n, err := rwmutex.New(op, name).Reset(ctx)
				return taken(n > 0, err)
			})
		},
		resetSem: func(t *testing.T, name string) {
			operate(t, func(ctx context.Context, op *session.Session) error {
				n, err := semaphore.New(op, name, 1).Reset(ctx) // Reset ignores the limit
				return taken(n > 0, err)
			})
		},
		resetPool: func(t *testing.T, name string) {
			operate(t, func(ctx context.Context, op *session.Session) error {
				n, err := pool.New(op, name).Reset(ctx)
				return taken(n > 0, err)
			})
		},
		removeMember: func(t *testing.T, p, m string) {
			operate(t, func(ctx context.Context, op *session.Session) error { return pool.New(op, p).Remove(ctx, m) })
		},
	}
}

// outcome is what a scenario observed, as named facts.
type outcome map[string]string

func (o outcome) set(fact string, v any) { o[fact] = fmt.Sprint(v) }

func (o outcome) String() string {
	var b strings.Builder
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range o {
			if !yield(k) {
				return
			}
		}
	}) {
		fmt.Fprintf(&b, "\n  %-55s %s", k, o[k])
	}
	return b.String()
}

// causeName names an error by the sentinel it matches.
func causeName(err error) string {
	switch {
	case err == nil:
		return "nil"
	case errors.Is(err, session.ErrLeaseLost):
		return "ErrLeaseLost"
	case errors.Is(err, session.ErrLost):
		return "ErrLost"
	case errors.Is(err, session.ErrReleased):
		return "ErrReleased"
	case errors.Is(err, session.ErrClosed):
		return "ErrClosed"
	case errors.Is(err, context.DeadlineExceeded):
		return "DeadlineExceeded"
	case errors.Is(err, mutex.ErrLocked):
		return "ErrLocked"
	case errors.Is(err, pool.ErrNotMember):
		return "ErrNotMember"
	case errors.Is(err, session.ErrRestartGrace):
		return "ErrRestartGrace" // its text says the time left, which differs
	case errors.Is(err, session.ErrInvalidOptions):
		return "ErrInvalidOptions"
	}
	return "other: " + err.Error()
}

// ended waits for h to end, at most bound, and returns when it saw it end.
func ended(t *testing.T, what string, h *session.Hold, bound time.Duration) time.Time {
	t.Helper()
	select {
	case <-h.Done():
		return time.Now()
	case <-time.After(bound):
		t.Fatalf("%s hold not ended within %v", what, bound)
		return time.Time{}
	}
}

// must returns a function that fails t on an error and otherwise returns v:
// must[*session.Hold](t)(m.Lock(ctx)).
func must[T any](t *testing.T) func(v T, err error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// pauseScenario: a session holding one of each kind is on a server that
// stops answering.
func pauseScenario(t *testing.T, b backend) outcome {
	const ttl = 2 * time.Second // a loss margin of TTL/100 + 5ms = 25ms
	o := outcome{}
	ctx := testutil.Ctx(t, 30*time.Second)
	s := b.open(t, session.Options{TTL: ttl, Heartbeat: ttl / 2})
	p := pool.New(s, "p")
	if err := p.Add(ctx, "k1", "k2"); err != nil {
		t.Fatal(err)
	}
	holds := map[string]*session.Hold{
		"mutex":     must[*session.Hold](t)(mutex.New(s, "m").Lock(ctx)),
		"semaphore": must[*session.Hold](t)(semaphore.New(s, "sem", 2).Acquire(ctx, 1)),
		"pool":      must[*session.Hold](t)(p.Acquire(ctx)),
		"election":  must[*session.Hold](t)(election.New(s, "e").Campaign(ctx, "me")),
	}

	// Pause right after a confirmed heartbeat, so that the next one is half a
	// TTL away, and read when the server will expire the lease.
	d0 := s.Deadline()
	testutil.WaitFor(t, ctx, func() bool { return s.Deadline().After(d0) })
	deadline := s.Deadline()
	expireAt, err := b.probe.Do(ctx, b.probe.B().Arbitrary("PEXPIRETIME").Keys(scripts.NewKeys(b.ns).Lease(s.ID())).Build()).AsInt64()
	if err != nil || expireAt <= 0 {
		t.Fatalf("PEXPIRETIME = %d, %v", expireAt, err)
	}
	t.Cleanup(b.resume) // also if the test fails while paused
	b.pause()
	paused := time.Now()

	// A call during the pause hangs until its ctx ends: a hang, not an error.
	tctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = mutex.New(s, "other").TryLock(tctx)
	cancel()
	o.set("TryLock during the pause", causeName(err))
	o.set("TryLock during the pause returned only at its ctx deadline", time.Since(paused) >= 200*time.Millisecond)

	var canceled time.Time
	for _, kind := range []string{"mutex", "semaphore", "pool", "election"} {
		if at := ended(t, kind, holds[kind], 3*ttl); at.After(canceled) {
			canceled = at
		}
		o.set(kind+" hold cause", causeName(context.Cause(holds[kind].Context())))
	}
	b.resume()
	o.set("session cause", causeName(s.Err()))
	o.set("canceled at or after the local deadline", !canceled.Before(deadline))
	// deadline = sent + TTL*0.99 - 5ms, so sent + TTL = deadline + TTL/100 + 5ms.
	o.set("canceled by sendTime(last heartbeat)+TTL", !canceled.After(deadline.Add(ttl/100+5*time.Millisecond)))
	margin := time.UnixMilli(expireAt).Sub(canceled)
	o.set("canceled before the lease's server-side expiry", margin > 0)
	t.Logf("paused→canceled %v; canceled %v before the server-side expiry", canceled.Sub(paused), margin)

	// After Resume, another session gets the mutex: at once if the lost
	// session's cleanup (queued during the pause) reached the server, else
	// once the lease has expired there.
	c := b.open(t, session.Options{TTL: ttl})
	h2, err := mutex.New(c, "m").Lock(ctx)
	o.set("next Lock", causeName(err))
	o.set("next token higher", err == nil && h2.Token() > holds["mutex"].Token())
	t.Logf("next Lock granted %v after the lost lease's server-side expiry", time.Since(time.UnixMilli(expireAt)))
	return o
}

// afterRestart bounds how long after a restart a session's heartbeat reaches
// the new server: its next heartbeat is at most one Heartbeat interval away,
// and each of the client's dropped connections costs it one failed attempt
// (EOF) and a short retry (Heartbeat/10 at first).
func afterRestart(ttl time.Duration) time.Duration { return ttl/3 + 250*time.Millisecond }

// restartGraceScenario: Redis restarts empty under a holder, restart grace on.
func restartGraceScenario(t *testing.T, b backend) outcome {
	const ttl = time.Second
	o := outcome{}
	ctx := testutil.Ctx(t, 30*time.Second)
	a := b.open(t, session.Options{TTL: ttl})
	c := b.open(t, session.Options{TTL: ttl})
	h := must[*session.Hold](t)(mutex.New(a, "kept").Lock(ctx))

	b.restartEmpty(t)
	restarted := time.Now()
	// a's next heartbeat notices the loss and reclaims.
	testutil.WaitFor(t, ctx, func() bool {
		in, err := mutex.New(c, "kept").Holder(ctx)
		return err == nil && in.Session == a.ID()
	})
	reclaimed := time.Since(restarted)
	in := must[mutex.Holder](t)(mutex.New(c, "kept").Holder(ctx))
	o.set("hold cause after the restart", causeName(h.Err()))
	o.set("session cause", causeName(a.Err()))
	o.set("reclaimed at the next heartbeat", reclaimed <= afterRestart(ttl))
	o.set("token kept", in.Token == h.Token())

	_, err := mutex.New(c, "free").TryLock(ctx)
	o.set("TryLock of a free mutex during the grace refused", err != nil && time.Since(restarted) < ttl)
	o.set("TryLock of a free mutex during the grace", causeName(err))
	h2, err := mutex.New(c, "free").Lock(ctx)
	waited := time.Since(restarted)
	o.set("Lock of a free mutex", causeName(err))
	o.set("Lock of a free mutex waited out the grace (TTL)", waited >= ttl-100*time.Millisecond)
	t.Logf("reclaimed %v after the restart; Lock granted after %v", reclaimed, waited)
	if err == nil {
		_ = h2.Release(ctx)
	}
	o.set("Release of the reclaimed hold", causeName(h.Release(ctx)))
	h3, err := mutex.New(c, "kept").TryLock(ctx)
	o.set("next token higher", err == nil && h3.Token() > h.Token())
	return o
}

// noGraceScenario: a session with DisableRestartGrace is refused by Dial,
// New and a Manager alike, and nothing is written to Redis: no grace would
// cover a data loss under its holds.
func noGraceScenario(t *testing.T, b backend) outcome {
	o := outcome{}
	ctx := testutil.Ctx(t, 10*time.Second)
	opts := session.Options{Namespace: b.ns, TTL: time.Second, DisableRestartGrace: true}
	before := nsKeys(t, b)

	s, err := session.Dial(ctx, b.clientOption, opts)
	o.set("Dial", causeName(err))
	if err == nil {
		_ = s.Close()
	}
	s, err = session.New(ctx, b.probe, opts)
	o.set("New", causeName(err))
	if err == nil {
		_ = s.Close()
	}
	m := session.NewManager(b.probe, opts)
	_, err = m.Session(ctx)
	o.set("Manager.Session", causeName(err))
	_ = m.Close()

	after := nsKeys(t, b)
	o.set("namespace's keys unchanged", slices.Equal(before, after))
	t.Logf("namespace's keys: %q before, %q after", before, after)
	return o
}

// nsKeys returns the names of the keys of b's namespace, sorted.
func nsKeys(t *testing.T, b backend) []string {
	t.Helper()
	ctx := testutil.Ctx(t, 10*time.Second)
	keys, err := b.probe.Do(ctx, b.probe.B().Keys().Pattern("{"+b.ns+"}:*").Build()).AsStrSlice()
	if err != nil {
		t.Fatalf("KEYS: %v", err)
	}
	slices.Sort(keys)
	return keys
}

// takenAway checks how hold h, taken away at since, ends: within one
// heartbeat interval, with ErrLost but not ErrLeaseLost, leaving the other
// hold and the session alive.
func takenAway(t *testing.T, o outcome, h, other *session.Hold, s *session.Session, since time.Time, hb time.Duration) {
	t.Helper()
	took := ended(t, "taken-away", h, 3*hb).Sub(since)
	o.set("hold cause", causeName(context.Cause(h.Context())))
	o.set("ended within one heartbeat interval", took <= hb+50*time.Millisecond)
	o.set("other hold", causeName(other.Err()))
	o.set("session", causeName(s.Err()))
	t.Logf("hold ended %v after the operator's action", took)
}

type grant struct {
	h   *session.Hold
	err error
}

// waitedReset is a resource with a holder and a queued waiter in another
// session, for resetServes.
type waitedReset struct {
	setup   func(ctx context.Context, s *session.Session) error // nil: none
	hold    func(ctx context.Context, s *session.Session) (*session.Hold, error)
	waiters func(ctx context.Context, s *session.Session) (int, error) // live waiters
	reset   func(t *testing.T, b backend)
}

// resetServes: the holder's hold alone ends with ErrLost within one
// heartbeat, and the waiter is granted with a higher token.
func resetServes(t *testing.T, b backend, r waitedReset) (outcome, *session.Session) {
	const ttl = time.Second
	o := outcome{}
	ctx := testutil.Ctx(t, 30*time.Second)
	a := b.open(t, session.Options{TTL: ttl})
	c := b.open(t, session.Options{TTL: ttl})
	if r.setup != nil {
		if err := r.setup(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	h := must[*session.Hold](t)(r.hold(ctx, a))
	other := must[*session.Hold](t)(mutex.New(a, "o").Lock(ctx))
	waiter := make(chan grant, 1)
	go func() {
		h, err := r.hold(ctx, c)
		waiter <- grant{h, err}
	}()
	testutil.WaitFor(t, ctx, func() bool {
		n, err := r.waiters(ctx, a)
		return err == nil && n == 1
	})

	since := time.Now()
	r.reset(t, b)
	takenAway(t, o, h, other, a, since, ttl/3)
	g := <-waiter
	o.set("waiter granted", causeName(g.err))
	o.set("waiter's token higher", g.err == nil && g.h.Token() > h.Token())
	o.set("Release of the reset hold", causeName(h.Release(ctx)))
	return o, a
}

func resetMutexScenario(t *testing.T, b backend) outcome {
	o, _ := resetServes(t, b, waitedReset{
		hold: func(ctx context.Context, s *session.Session) (*session.Hold, error) {
			return mutex.New(s, "m").Lock(ctx)
		},
		waiters: func(ctx context.Context, s *session.Session) (int, error) {
			in, err := mutex.New(s, "m").Holder(ctx)
			return in.Waiters, err
		},
		reset: func(t *testing.T, b backend) { b.resetMutex(t, "m") },
	})
	return o
}

func resetElectionScenario(t *testing.T, b backend) outcome {
	const ttl = time.Second
	o := outcome{}
	ctx := testutil.Ctx(t, 30*time.Second)
	a := b.open(t, session.Options{TTL: ttl})
	c := b.open(t, session.Options{TTL: ttl})
	h := must[*session.Hold](t)(election.New(a, "e").Campaign(ctx, "a"))
	other := must[*session.Hold](t)(mutex.New(a, "o").Lock(ctx))
	// c's campaign is queued behind a, or arrives after the reset: either
	// way it wins.
	next := make(chan grant, 1)
	go func() {
		h, err := election.New(c, "e").Campaign(ctx, "c")
		next <- grant{h, err}
	}()

	since := time.Now()
	b.resetElection(t, "e")
	takenAway(t, o, h, other, a, since, ttl/3)
	g := <-next
	o.set("next candidate elected", causeName(g.err))
	o.set("next term higher", g.err == nil && g.h.Token() > h.Token())
	l, err := election.New(a, "e").Leader(ctx)
	o.set("Leader is the next candidate", err == nil && l.Session == c.ID() && l.Value == "c")
	return o
}

// resetRWMutexScenario: two sessions read, a writer waits; the reset takes
// both readers and the writer is granted.
func resetRWMutexScenario(t *testing.T, b backend) outcome {
	const ttl = time.Second
	o := outcome{}
	ctx := testutil.Ctx(t, 30*time.Second)
	a := b.open(t, session.Options{TTL: ttl})
	c := b.open(t, session.Options{TTL: ttl})
	h := must[*session.Hold](t)(rwmutex.New(a, "rw").RLock(ctx))
	other := must[*session.Hold](t)(mutex.New(a, "o").Lock(ctx))
	hc := must[*session.Hold](t)(rwmutex.New(c, "rw").RLock(ctx))
	writer := make(chan grant, 1)
	go func() {
		h, err := rwmutex.New(c, "rw").Lock(ctx)
		writer <- grant{h, err}
	}()
	testutil.WaitFor(t, ctx, func() bool {
		st, err := rwmutex.New(a, "rw").Holders(ctx)
		return err == nil && st.QueuedWriters() == 1
	})

	since := time.Now()
	b.resetRWMutex(t, "rw")
	takenAway(t, o, h, other, a, since, ttl/3)
	<-hc.Done()
	o.set("other reader's cause", causeName(context.Cause(hc.Context())))
	g := <-writer
	o.set("writer granted", causeName(g.err))
	o.set("writer's token higher", g.err == nil && g.h.Token() > max(h.Token(), hc.Token()))
	o.set("Release of the reset hold", causeName(h.Release(ctx)))
	return o
}

func resetSemaphoreScenario(t *testing.T, b backend) outcome {
	o, _ := resetServes(t, b, waitedReset{
		hold: func(ctx context.Context, s *session.Session) (*session.Hold, error) {
			return semaphore.New(s, "sem", 2).Acquire(ctx, 2)
		},
		waiters: func(ctx context.Context, s *session.Session) (int, error) {
			st, err := semaphore.New(s, "sem", 2).Stats(ctx)
			return st.Waiters, err
		},
		reset: func(t *testing.T, b backend) { b.resetSem(t, "sem") },
	})
	return o
}

func resetPoolScenario(t *testing.T, b backend) outcome {
	o, a := resetServes(t, b, waitedReset{
		setup: func(ctx context.Context, s *session.Session) error { return pool.New(s, "p").Add(ctx, "k1") },
		hold: func(ctx context.Context, s *session.Session) (*session.Hold, error) {
			return pool.New(s, "p").Acquire(ctx)
		},
		waiters: func(ctx context.Context, s *session.Session) (int, error) {
			st, err := pool.New(s, "p").Stats(ctx)
			return st.Waiters, err
		},
		reset: func(t *testing.T, b backend) { b.resetPool(t, "p") },
	})
	o.set("members", must[[]string](t)(pool.New(a, "p").Members(testutil.Ctx(t, 10*time.Second))))
	return o
}

func removeMemberScenario(t *testing.T, b backend) outcome {
	const ttl = time.Second
	o := outcome{}
	ctx := testutil.Ctx(t, 30*time.Second)
	a := b.open(t, session.Options{TTL: ttl})
	c := b.open(t, session.Options{TTL: ttl})
	p := pool.New(a, "p")
	if err := p.Add(ctx, "k1", "k2"); err != nil {
		t.Fatal(err)
	}
	h := must[*session.Hold](t)(p.AcquireKey(ctx, "k1"))
	other := must[*session.Hold](t)(p.AcquireKey(ctx, "k2"))

	since := time.Now()
	b.removeMember(t, "p", "k1")
	takenAway(t, o, h, other, a, since, ttl/3)
	_, err := pool.New(c, "p").AcquireKey(ctx, "k1")
	o.set("AcquireKey of the removed member", causeName(err))
	o.set("members", must[[]string](t)(p.Members(ctx)))
	return o
}

func TestFaultsMatchRealRedis(t *testing.T) {
	takenAwayWant := outcome{
		"hold cause": "ErrLost", "ended within one heartbeat interval": "true",
		"other hold": "nil", "session": "nil",
	}
	with := func(a, b outcome) outcome {
		o := outcome{}
		for k, v := range a {
			o[k] = v
		}
		for k, v := range b {
			o[k] = v
		}
		return o
	}
	for _, sc := range []struct {
		name string
		run  func(*testing.T, backend) outcome
		want outcome
	}{
		{"Pause", pauseScenario, outcome{
			"TryLock during the pause":                                   "DeadlineExceeded",
			"TryLock during the pause returned only at its ctx deadline": "true",
			"mutex hold cause":                                           "ErrLeaseLost",
			"semaphore hold cause":                                       "ErrLeaseLost",
			"pool hold cause":                                            "ErrLeaseLost",
			"election hold cause":                                        "ErrLeaseLost",
			"session cause":                                              "ErrLeaseLost",
			"canceled at or after the local deadline":                    "true",
			"canceled by sendTime(last heartbeat)+TTL":                   "true",
			"canceled before the lease's server-side expiry":             "true",
			"next Lock":         "nil",
			"next token higher": "true",
		}},
		{"RestartEmpty", restartGraceScenario, outcome{
			"hold cause after the restart":                     "nil",
			"session cause":                                    "nil",
			"reclaimed at the next heartbeat":                  "true",
			"token kept":                                       "true",
			"TryLock of a free mutex during the grace refused": "true",
			"TryLock of a free mutex during the grace":         "ErrRestartGrace",
			"Lock of a free mutex":                             "nil",
			"Lock of a free mutex waited out the grace (TTL)":  "true",
			"Release of the reclaimed hold":                    "nil",
			"next token higher":                                "true",
		}},
		{"DisableRestartGraceRefused", noGraceScenario, outcome{
			"Dial":                       "ErrInvalidOptions",
			"New":                        "ErrInvalidOptions",
			"Manager.Session":            "ErrInvalidOptions",
			"namespace's keys unchanged": "true",
		}},
		{"ResetMutex", resetMutexScenario, with(takenAwayWant, outcome{
			"waiter granted": "nil", "waiter's token higher": "true", "Release of the reset hold": "ErrLost",
		})},
		{"ResetElection", resetElectionScenario, with(takenAwayWant, outcome{
			"next candidate elected": "nil", "next term higher": "true", "Leader is the next candidate": "true",
		})},
		{"ResetRWMutex", resetRWMutexScenario, with(takenAwayWant, outcome{
			"other reader's cause": "ErrLost", "writer granted": "nil", "writer's token higher": "true",
			"Release of the reset hold": "ErrLost",
		})},
		{"ResetSemaphore", resetSemaphoreScenario, with(takenAwayWant, outcome{
			"waiter granted": "nil", "waiter's token higher": "true", "Release of the reset hold": "ErrLost",
		})},
		{"ResetPool", resetPoolScenario, with(takenAwayWant, outcome{
			"waiter granted": "nil", "waiter's token higher": "true", "members": "[k1]",
			"Release of the reset hold": "ErrLost",
		})},
		{"RemovePoolMember", removeMemberScenario, with(takenAwayWant, outcome{
			"AcquireKey of the removed member": "ErrNotMember", "members": "[k2]",
		})},
	} {
		t.Run(sc.name, func(t *testing.T) {
			got := map[string]outcome{}
			for _, be := range []struct {
				name string
				new  func(*testing.T) backend
			}{{"kit", kitBackend}, {"redis", redisBackend}} {
				t.Run(be.name, func(t *testing.T) {
					o := sc.run(t, be.new(t))
					t.Logf("outcome:%v", o)
					for fact, want := range sc.want {
						if o[fact] != want {
							t.Errorf("%s: got %q, want %q", fact, o[fact], want)
						}
					}
					got[be.name] = o
				})
			}
			kit, real := got["kit"], got["redis"]
			if kit == nil || real == nil {
				return // a run failed
			}
			for fact := range with(kit, real) {
				if kit[fact] != real[fact] {
					t.Errorf("%s: kit %q, real Redis %q", fact, kit[fact], real[fact])
				}
			}
		})
	}
}
