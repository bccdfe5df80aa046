package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/flight"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/session"
)

// ---- distributed singleflight versus cache-aside (one hot key) ----
//
// flightCallers callers (flightProcs "processes", each a client or a
// session of its own) read one key in a closed loop for the window. The
// value stays fresh for flightTTL; computing it is a database call that
// takes flightDB. Cache-aside is the loop a service writes without
// coordination: GET; on a miss, compute and SET PX TTL. Every caller that
// misses while the value is being recomputed computes too (the dogpile).
// flight.Group.Do computes once per expiry and lets the others wait.

const (
	flightProcs   = 4
	flightCallers = 64
	flightTTL     = 100 * time.Millisecond
	flightDB      = 5 * time.Millisecond
)

type flightRun struct {
	Calls        float64
	CallsPerSec  float64
	DBCalls      float64 // fn runs: database calls
	DBPerWindow  float64 // database calls per TTL window: 1 is ideal
	P50us        float64 // Do / cache-aside call latency
	P99us        float64
	ReqPerCall   float64 // client requests per call
	Errors       float64
	ErrorSamples []string `json:",omitempty"`
}

type flightRow struct {
	Contender string
	Rounds    []flightRun
	Med       flightRun
	Err       string `json:",omitempty"`
}

// flightCaller is one "process" of a contender: get returns the key's value,
// computing it with db on a miss.
type flightCaller func(ctx context.Context, db func() []byte) ([]byte, error)

type flightContender struct {
	name string
	// open returns the callers of one process and their request counter.
	open func(ctx context.Context, addr, ns string, cnt *counter) (flightCaller, func(), error)
}

func flightContenders() []flightContender {
	return []flightContender{
		{name: "leasehold flight.Group.Do", open: openFlight},
		{name: "cache-aside (GET; SET PX on a miss)", open: openCacheAside},
	}
}

func openFlight(ctx context.Context, addr, ns string, cnt *counter) (flightCaller, func(), error) {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true,
		ConnWriteTimeout: 5 * time.Second})
	if err != nil {
		return nil, nil, err
	}
	if err := leaseholdtest.MarkIntact(ctx, rueidis.ClientOption{InitAddress: []string{addr}}, ns); err != nil { // brand new
		c.Close()
		return nil, nil, err
	}
	s, err := session.New(ctx, wrap(c, cnt), session.Options{Namespace: ns, TTL: 10 * time.Second})
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	g := flight.New(s, "bench", flight.Options{TTL: flightTTL})
	call := func(ctx context.Context, db func() []byte) ([]byte, error) {
		return g.Do(ctx, "hot", func(context.Context) ([]byte, error) { return db(), nil })
	}
	return call, func() { _ = s.Close(); c.Close() }, nil
}

func openCacheAside(_ context.Context, addr, ns string, cnt *counter) (flightCaller, func(), error) {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		return nil, nil, err
	}
	w := wrap(c, cnt)
	key := "{" + ns + "}:hot"
	call := func(ctx context.Context, db func() []byte) ([]byte, error) {
		v, err := w.Do(ctx, w.B().Get().Key(key).Build()).AsBytes()
		if err == nil {
			return v, nil
		}
		if !rueidis.IsRedisNil(err) {
			return nil, err
		}
		v = db()
		return v, w.Do(ctx, w.B().Set().Key(key).Value(rueidis.BinaryString(v)).Px(flightTTL).Build()).Error()
	}
	return call, c.Close, nil
}

func (h *harness) runFlight(ctx context.Context) {
	cs := flightContenders()
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.name
	}
	runs, errs := roundRobin(h, "flight", names, func(i, _ int) (flightRun, error) { return h.flight(ctx, cs[i]) })
	for i, c := range cs {
		h.res.Flight = append(h.res.Flight, flightRow{Contender: c.name, Rounds: runs[i], Med: medianOf(runs[i]), Err: errs[i]})
	}
}

// flight runs flightCallers callers of contender c for one window.
func (h *harness) flight(ctx context.Context, c flightContender) (flightRun, error) {
	if err := h.adm.flush(ctx); err != nil {
		return flightRun{}, err
	}
	ns := h.ns()
	var cnt counter
	var calls []flightCaller
	for range flightProcs {
		call, closeFn, err := c.open(ctx, h.srv.addr(), ns, &cnt)
		if err != nil {
			return flightRun{}, err
		}
		defer closeFn()
		calls = append(calls, call)
	}
	var db atomic.Int64
	compute := func() []byte {
		db.Add(1)
		time.Sleep(flightDB) // the database call
		return []byte("report")
	}
	var (
		on      atomic.Bool
		lat     latencies
		errs    atomic.Int64
		samples errSamples
	)
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	for i := range flightCallers {
		call := calls[i%flightProcs]
		wg.Go(func() {
			for wctx.Err() == nil {
				t0 := time.Now()
				v, err := call(wctx, compute)
				d := time.Since(t0)
				if !on.Load() {
					continue
				}
				switch {
				case err == nil && string(v) == "report":
					lat.add(d)
				case wctx.Err() == nil:
					errs.Add(1)
					if err == nil {
						err = fmt.Errorf("value %q", v)
					}
					samples.add(err)
				}
			}
		})
	}
	time.Sleep(h.cfg.Warmup)
	db0, req0 := db.Load(), cnt.total()
	on.Store(true)
	start := time.Now()
	time.Sleep(h.cfg.ContDuration)
	on.Store(false)
	elapsed := time.Since(start)
	dbN, reqN := db.Load()-db0, cnt.total()-req0
	stop()
	if !waitTimeout(&wg, 30*time.Second) {
		return flightRun{}, errors.New("callers did not end within 30s")
	}
	d := lat.take()
	n := float64(len(d))
	return flightRun{
		Calls: n, CallsPerSec: n / elapsed.Seconds(), DBCalls: float64(dbN),
		DBPerWindow: float64(dbN) / (float64(elapsed) / float64(flightTTL)),
		P50us:       float64(pct(d, 50).Microseconds()), P99us: float64(pct(d, 99).Microseconds()),
		ReqPerCall: float64(reqN) / max(n, 1), Errors: float64(errs.Load()), ErrorSamples: samples.list(),
	}, nil
}

func (h *harness) flightMarkdown(b *strings.Builder) {
	if len(h.res.Flight) == 0 {
		return
	}
	fmt.Fprintf(b, "## One hot key: distributed singleflight versus cache-aside\n\n")
	fmt.Fprintf(b, "%d callers in a closed loop on one key across %d clients (sessions for leasehold); the value is fresh for %v, computing it is a %v database call. `db/window` is database calls per TTL window (1 is ideal); `req/call` client requests per call (heartbeats included). Ratios: cache-aside / flight for database calls, flight / cache-aside for latencies.\n\n",
		flightCallers, flightProcs, flightTTL, flightDB)
	t := newTable(b, "contender", "db calls", "db/window", "calls/s", "p50 µs", "p99 µs", "req/call", "errors")
	for _, r := range h.res.Flight {
		if r.Err != "" && len(r.Rounds) == 0 {
			t.row(r.Contender, "ERROR: "+r.Err)
			continue
		}
		m := r.Med
		t.row(r.Contender, num(m.DBCalls), num(m.DBPerWindow), num(m.CallsPerSec), num(m.P50us), num(m.P99us), num(m.ReqPerCall), count(int(m.Errors)))
	}
	if len(h.res.Flight) == 2 {
		f, c := h.res.Flight[0].Med, h.res.Flight[1].Med
		fmt.Fprintf(b, "\nRatios in this run: database calls %s fewer with flight; p50 %s, p99 %s of cache-aside's.\n",
			ratio(c.DBCalls, f.DBCalls), ratio(f.P50us, c.P50us), ratio(f.P99us, c.P99us))
	}
	b.WriteString("\n")
}
