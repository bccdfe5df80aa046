package main

// Micro-benchmarks of the session actor and the Lua scripts, on a
// redis-server started for them (TestMain). Besides ns/op they report:
//
//	rt/op      client round trips (Do/DoMulti calls) per op, counted by a
//	           wrapper around the rueidis.Client given to session.New
//	req/op     commands sent per op
//	lua-us/op  time Redis spent in scripts per op (INFO commandstats usec of
//	           EVALSHA and EVAL)
//	srv-cpu-us/op  redis-server CPU per op (INFO cpu), network work included
//
// Run them with `go test -run '^$' -bench . ./` in bench/ (make bench does).
// Sessions' namespaces are marked intact (leaseholdtest.MarkIntact): the
// server is brand new, and the restart grace would refuse grants for 10s;
// it changes no per-operation work.

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/mutex"
	"github.com/leasehold/leasehold/session"
)

var microSrv *server

func TestMain(m *testing.M) {
	code := func() int {
		var err error
		if microSrv, err = startServer(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer microSrv.kill()
		return m.Run()
	}()
	os.Exit(code)
}

var microNS atomic.Int64

type microEnv struct {
	b   *testing.B
	adm *admin
	cnt *counter
	c   rueidis.Client // wrapped
	raw rueidis.Client
	// noConn leaves session.Options.Conn unset (see session)
	noConn bool
}

func newMicro(b *testing.B) *microEnv {
	b.Helper()
	adm, err := newAdmin(microSrv.addr())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(adm.close)
	raw, err := rueidis.NewClient(rueidisOpt(microSrv.addr(), procOpts{}))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(raw.Close)
	cnt := &counter{}
	return &microEnv{b: b, adm: adm, cnt: cnt, c: wrap(raw, cnt), raw: raw}
}

func (e *microEnv) session(o session.Options) *session.Session {
	e.b.Helper()
	if o.Namespace == "" {
		o.Namespace = fmt.Sprintf("micro%d", microNS.Add(1))
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if err := leaseholdtest.MarkIntact(ctx, rueidisOpt(microSrv.addr(), procOpts{}), o.Namespace); err != nil {
		e.b.Fatal(err)
	}
	// The session's own connection, as session.Dial gives it one; its
	// requests are counted with the wrapped client's.
	if !e.noConn {
		lane := countDials(rueidisOpt(microSrv.addr(), procOpts{}), e.cnt)
		o.Conn = &lane
	}
	s, err := session.New(ctx, e.c, o)
	if err != nil {
		e.b.Fatal(err)
	}
	e.b.Cleanup(func() { _ = s.Close() })
	return s
}

// measure runs the benchmark loop body between two snapshots and reports
// round trips, requests and server time per op.
func (e *microEnv) measure(body func()) {
	b := e.b
	ctx := context.Background()
	a, err := e.adm.stats(ctx)
	if err != nil {
		b.Fatal(err)
	}
	trips, reqs := e.cnt.trips.Load(), e.cnt.total()
	b.ResetTimer()
	cpu0 := procCPU()
	body()
	cpu := procCPU() - cpu0
	b.StopTimer()
	z, err := e.adm.stats(ctx)
	if err != nil {
		b.Fatal(err)
	}
	n := float64(b.N)
	d := z.sub(a)
	b.ReportMetric(float64(e.cnt.trips.Load()-trips)/n, "rt/op")
	b.ReportMetric(float64(e.cnt.total()-reqs)/n, "req/op")
	// Script time only: commands run inside a script are also counted
	// under their own names, so summing every command would count them twice.
	b.ReportMetric(float64(d.usec["evalsha"]+d.usec["eval"])/n, "lua-us/op")
	b.ReportMetric(d.cpu*1e6/n, "srv-cpu-us/op")
	b.ReportMetric(float64(cpu.Microseconds())/n, "cli-cpu-us/op")
}

// BenchmarkRawLockRelease is the baseline: SET NX PX + compare-and-delete.
func BenchmarkRawLockRelease(b *testing.B) {
	e := newMicro(b)
	ctx := context.Background()
	e.measure(func() {
		for b.Loop() {
			if err := e.c.Do(ctx, e.c.B().Set().Key("raw").Value("v").Nx().PxMilliseconds(10000).Build()).Error(); err != nil {
				b.Fatal(err)
			}
			if err := rawRelease.Exec(ctx, e.c, []string{"raw"}, []string{"v"}).Error(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkMutexLockRelease is an uncontended leasehold Lock + Release:
// one acquire script, one release script, and the actor's bookkeeping.
func BenchmarkMutexLockRelease(b *testing.B) { benchLockRelease(b, context.Background()) }

// BenchmarkMutexLockReleaseCancelable is BenchmarkMutexLockRelease with a
// ctx that can be canceled, as a daemon's usually is (and the bench's
// contenders get). Both run on the caller's goroutine, over the session's
// own connection (session.Options.Conn), which returns a call at its ctx's
// cancellation by breaking the connection (docs/design.md, "The session's
// own connection"); ...NoConn shows the same without that connection.
func BenchmarkMutexLockReleaseCancelable(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	benchLockRelease(b, ctx)
}

// benchLockRelease times Lock + Release of one mutex with ctx.
func benchLockRelease(b *testing.B, ctx context.Context, noConn ...bool) {
	e := newMicro(b)
	e.noConn = len(noConn) > 0 && noConn[0]
	m := mutex.New(e.session(session.Options{}), "m")
	warm(b, m)
	e.measure(func() {
		for b.Loop() {
			h, err := m.Lock(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if err := h.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkMutexLockReleaseCancelableNoConn is
// BenchmarkMutexLockReleaseCancelable on a session without a connection of
// its own (session.Options.Conn unset, as session.New leaves it): each call
// is handed to another goroutine and back, or pipelined by rueidis. The
// difference is what the session's connection saves.
func BenchmarkMutexLockReleaseCancelableNoConn(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	benchLockRelease(b, ctx, true)
}

// BenchmarkMutexTryLockRelease is TryLock + Release (no subscription).
func BenchmarkMutexTryLockRelease(b *testing.B) {
	e := newMicro(b)
	s := e.session(session.Options{})
	m := mutex.New(s, "m")
	ctx := context.Background()
	e.measure(func() {
		for b.Loop() {
			h, err := m.TryLock(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if err := h.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkMutexLockReleaseParallel runs Lock + Release from GOMAXPROCS*4
// goroutines of one session, each on its own mutex: the actor's contention.
func BenchmarkMutexLockReleaseParallel(b *testing.B) {
	e := newMicro(b)
	s := e.session(session.Options{})
	var id atomic.Int64
	ctx := context.Background()
	b.SetParallelism(4)
	e.measure(func() {
		b.RunParallel(func(pb *testing.PB) {
			m := mutex.New(s, fmt.Sprintf("p%d", id.Add(1)))
			for pb.Next() {
				h, err := m.Lock(ctx)
				if err != nil {
					b.Error(err)
					return
				}
				if err := h.Release(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkMutexTryLockBusy is a failed TryLock: one round trip, no hold.
func BenchmarkMutexTryLockBusy(b *testing.B) { benchTryLockBusy(b, context.Background()) }

// BenchmarkMutexTryLockBusyCancelable is BenchmarkMutexTryLockBusy with a
// ctx that can be canceled (see BenchmarkMutexLockReleaseCancelable).
func BenchmarkMutexTryLockBusyCancelable(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	benchTryLockBusy(b, ctx)
}

// BenchmarkMutexTryLockBusyCancelableNoConn is
// BenchmarkMutexTryLockBusyCancelable without the session's own connection
// (see BenchmarkMutexLockReleaseCancelableNoConn).
func BenchmarkMutexTryLockBusyCancelableNoConn(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	benchTryLockBusy(b, ctx, true)
}

// benchTryLockBusy times a failed TryLock with tctx.
func benchTryLockBusy(b *testing.B, tctx context.Context, noConn ...bool) {
	e := newMicro(b)
	e.noConn = len(noConn) > 0 && noConn[0]
	s := e.session(session.Options{})
	ctx := context.Background()
	h, err := mutex.New(s, "busy").TryLock(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer h.Release(ctx)
	s2 := e.session(session.Options{Namespace: s.Options().Namespace})
	m := mutex.New(s2, "busy")
	e.measure(func() {
		for b.Loop() {
			if _, err := m.TryLock(tctx); err != mutex.ErrLocked {
				b.Fatalf("TryLock: %v, want ErrLocked", err)
			}
		}
	})
}

// BenchmarkMutexHandoff measures one cycle of two sessions handing one
// mutex back and forth (two hand-offs per op): Release runs the hand-off
// script, the waiter learns of its grant by pub/sub.
func BenchmarkMutexHandoff(b *testing.B) {
	e := newMicro(b)
	s1 := e.session(session.Options{})
	s2 := e.session(session.Options{Namespace: s1.Options().Namespace})
	m1, m2 := mutex.New(s1, "h"), mutex.New(s2, "h")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	warm(b, m1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			h, err := m2.Lock(ctx)
			if err != nil {
				return
			}
			_ = h.Release(context.Background())
		}
	}()
	e.measure(func() {
		for b.Loop() {
			h, err := m1.Lock(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if err := h.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	cancel()
	<-done
}

// BenchmarkSessionOpenClose opens and closes a session.
func BenchmarkSessionOpenClose(b *testing.B) {
	e := newMicro(b)
	ns := fmt.Sprintf("micro%d", microNS.Add(1))
	if err := leaseholdtest.MarkIntact(context.Background(), rueidisOpt(microSrv.addr(), procOpts{}), ns); err != nil {
		b.Fatal(err)
	}
	e.measure(func() {
		for b.Loop() {
			ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			s, err := session.New(ctx, e.c, session.Options{Namespace: ns})
			cancel()
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func warm(b *testing.B, m *mutex.Mutex) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	h, err := m.Lock(ctx) // subscribes the session's notification connection
	if err != nil {
		b.Fatal(err)
	}
	if err := h.Release(ctx); err != nil {
		b.Fatal(err)
	}
}

// ---- the Lua scripts on their own ----
//
// These load internal/scripts/*.lua (common.lua prepended, as the library
// does) and call them directly with EVALSHA, so that their server time can
// be compared with a bare SET NX PX. They follow the KEYS/ARGV headers of
// the scripts as of this writing; a script whose contract changed is
// skipped with the reply it gave.

func loadScript(b *testing.B, name string) *rueidis.Lua {
	b.Helper()
	text := scripts.Text(name)
	if text == "" {
		b.Fatalf("internal/scripts does not know %s", name)
	}
	return rueidis.NewLuaScript(text)
}

// luaFixture creates a live lease and an intact epoch marker in a new
// namespace, as session.New would.
func luaFixture(b *testing.B, e *microEnv) (prefix, sid string) {
	b.Helper()
	ns := fmt.Sprintf("lua%d", microNS.Add(1))
	prefix, sid = "{"+ns+"}:", "s1"
	ctx := context.Background()
	for _, cmd := range [][]string{
		{"HSET", prefix + "s:" + sid, "owner", "bench", "ttl", "60000", "ld", "0", "g", "0"},
		{"PEXPIRE", prefix + "s:" + sid, "60000"},
		{"SET", prefix + "epoch", "0"},
	} {
		if err := e.adm.do(ctx, cmd...).Error(); err != nil {
			b.Fatal(err)
		}
	}
	return prefix, sid
}

// luaMutexOpts is the tail of mutex_acquire.lua's options for the lease
// of luaFixture (TTL 60 s, no lock delay): held_ms, lock delay, idle time.
const luaMutexOpts = "120000|0|120000"

func BenchmarkLua(b *testing.B) {
	b.Run("raw-set-nx-px+cad", func(b *testing.B) {
		e := newMicro(b)
		ctx := context.Background()
		e.measure(func() {
			for b.Loop() {
				_ = e.c.Do(ctx, e.c.B().Set().Key("lraw").Value("v").Nx().PxMilliseconds(10000).Build())
				_ = rawRelease.Exec(ctx, e.c, []string{"lraw"}, []string{"v"})
			}
		})
	})
	b.Run("mutex_acquire+mutex_release", func(b *testing.B) {
		e := newMicro(b)
		acq, rel := loadScript(b, "mutex_acquire.lua"), loadScript(b, "mutex_release.lua")
		prefix, sid := luaFixture(b, e)
		keys, relKeys := []string{prefix + "m:x", prefix + "s:" + sid}, []string{prefix + "m:x"}
		hid := sid + ".1"
		ctx := context.Background()
		// Options: queue when busy, not sharded, held_ms, lock delay 0 and
		// idle time of a 60 s TTL; release: not sharded, no withdrawal.
		acqArgs, relArgs := []string{hid, "10" + luaMutexOpts}, []string{hid, "00"}
		check := func() {
			// A grant on the fast path is the bare token (docs/protocol.md,
			// "Reply codes"); any other reply is an array.
			m, err := acq.Exec(ctx, e.c, keys, acqArgs).ToMessage()
			if err != nil || m.IsArray() {
				b.Fatalf("mutex_acquire.lua did not grant on its fast path: %v %v", m, err)
			}
			if tok, err := m.AsInt64(); err != nil || tok <= 0 {
				b.Fatalf("mutex_acquire.lua contract changed: token %v %v", tok, err)
			}
			if n, err := rel.Exec(ctx, e.c, relKeys, relArgs).AsInt64(); err != nil || n != 1 {
				b.Fatalf("mutex_release.lua contract changed: %v %v", n, err)
			}
		}
		check() // a fresh name: the fast path grants with the clock's token
		check() // an idle mutex: the fast path, after the stored token
		e.measure(func() {
			for b.Loop() {
				_ = acq.Exec(ctx, e.c, keys, acqArgs)
				_ = rel.Exec(ctx, e.c, relKeys, relArgs)
			}
		})
	})
	// The same two pairs from 32 goroutines (16 per CPU), each on its own
	// key, on one client: the uncontended parallel scenario without any
	// client library around the scripts. Their ns/op ratio is the floor
	// that leasehold's protocol sets for the parallel target.
	b.Run("raw-set-nx-px+cad-parallel", func(b *testing.B) {
		e := newMicro(b)
		var id atomic.Int64
		b.SetParallelism(16)
		e.measure(func() {
			b.RunParallel(func(pb *testing.PB) {
				ctx, key := context.Background(), fmt.Sprintf("lrawp%d", id.Add(1))
				for pb.Next() {
					_ = e.c.Do(ctx, e.c.B().Set().Key(key).Value("v").Nx().PxMilliseconds(10000).Build())
					_ = rawRelease.Exec(ctx, e.c, []string{key}, []string{"v"})
				}
			})
		})
	})
	b.Run("mutex_acquire+mutex_release-parallel", func(b *testing.B) {
		e := newMicro(b)
		acq, rel := loadScript(b, "mutex_acquire.lua"), loadScript(b, "mutex_release.lua")
		prefix, sid := luaFixture(b, e)
		var id atomic.Int64
		b.SetParallelism(16)
		e.measure(func() {
			b.RunParallel(func(pb *testing.PB) {
				n := id.Add(1)
				name := fmt.Sprintf("p%d", n)
				keys, relKeys := []string{prefix + "m:" + name, prefix + "s:" + sid}, []string{prefix + "m:" + name}
				hid := fmt.Sprintf("%s.%d", sid, n)
				acqArgs, relArgs := []string{hid, "10" + luaMutexOpts}, []string{hid, "00"}
				ctx := context.Background()
				for pb.Next() {
					_ = acq.Exec(ctx, e.c, keys, acqArgs)
					_ = rel.Exec(ctx, e.c, relKeys, relArgs)
				}
			})
		})
	})
	b.Run("mutex_acquire-busy", func(b *testing.B) {
		e := newMicro(b)
		acq := loadScript(b, "mutex_acquire.lua")
		prefix, sid := luaFixture(b, e)
		keys := []string{prefix + "m:x", prefix + "s:" + sid}
		ctx := context.Background()
		if m, err := acq.Exec(ctx, e.c, keys, []string{sid + ".1", "10" + luaMutexOpts}).ToMessage(); err != nil || m.IsArray() {
			b.Fatalf("mutex_acquire.lua did not grant on its fast path: %v %v", m, err)
		}
		if v, err := acq.Exec(ctx, e.c, keys, []string{sid + ".2", "00" + luaMutexOpts}).ToArray(); err != nil || len(v) != 3 {
			b.Fatalf("mutex_acquire.lua busy reply changed: %v %v", v, err)
		} else if n, _ := v[0].AsInt64(); n != 0 {
			b.Fatalf("mutex_acquire.lua did not answer busy: %v", v)
		}
		e.measure(func() {
			for b.Loop() {
				_ = acq.Exec(ctx, e.c, keys, []string{sid + ".2", "00" + luaMutexOpts})
			}
		})
	})
	b.Run("heartbeat", func(b *testing.B) {
		e := newMicro(b)
		hb := loadScript(b, "heartbeat.lua")
		prefix, sid := luaFixture(b, e)
		keys := []string{prefix + "s:" + sid}
		ctx := context.Background()
		if v, err := hb.Exec(ctx, e.c, keys, []string{"60000", prefix, "60000", "0"}).ToArray(); err != nil || len(v) < 1 {
			b.Fatalf("heartbeat.lua contract changed: %v %v", v, err)
		} else if n, _ := v[0].AsInt64(); n != 1 {
			b.Fatalf("heartbeat.lua did not renew: %v", v)
		}
		e.measure(func() {
			for b.Loop() {
				_ = hb.Exec(ctx, e.c, keys, []string{"60000", prefix, "60000", "0"})
			}
		})
	})
}
