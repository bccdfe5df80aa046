package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/election"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/hook"
	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/mutex"
	"github.com/leasehold/leasehold/pool"
	"github.com/leasehold/leasehold/rwmutex"
	"github.com/leasehold/leasehold/semaphore"
	"github.com/leasehold/leasehold/session"
)

// The primitives a workload exercises.
const (
	Mutex     = "mutex"
	Semaphore = "semaphore"
	Pool      = "pool"
	Election  = "election"
	RWMutex   = "rwmutex"
)

// AllKinds lists every primitive.
var AllKinds = []string{Mutex, Semaphore, Pool, Election, RWMutex, Job}

// helperEnv carries a holder process's WorkerConfig, as JSON.
const helperEnv = "LEASEHOLD_CHAOS_HELPER"

// WorkerConfig is what one holder process runs: one session (re-opened
// after a loss) and one worker per kind, each looping acquire, hold, release.
type WorkerConfig struct {
	Proc       int
	Seed       uint64
	Addrs      []string // Redis, the Sentinels when MasterSet is set, or the cluster's nodes
	MasterSet  string
	Namespace  string
	TTL        time.Duration
	LockDelay  time.Duration
	ReplicaAck int
	Store      string // the fenced store's address
	Kinds      []string
	Mutexes    []string
	SemLimit   int64
	SemMaxN    int64
	PoolKeys   []string
	HoldMin    time.Duration // most holds last [HoldMin, HoldMax)
	HoldMax    time.Duration
	LongP      float64       // a fraction LongP of holds last [LongMin, LongMax),
	LongMin    time.Duration // longer than the TTL, so that faults catch
	LongMax    time.Duration // them while held
	WaitMin    time.Duration
	WaitMax    time.Duration
	OpEvery    time.Duration

	RestartGrace time.Duration // the sessions' Options.RestartGrace; 0: the default
	Shards       int           // the sessions' Options.Shards; 0: unsharded
}

// Resource names, fixed for every scenario.
const (
	semName  = "sem"
	poolName = "pool"
	elName   = "leader"
	rwName   = "rw"
)

// rwReadP is the share of a rwmutex worker's acquisitions that are reads.
const rwReadP = 0.75

// readDetail marks the grant event of a read (shared) hold.
const readDetail = "read"

// HelperProcess is the body of a holder process. A test package that runs
// scenarios defines
//
//	func TestHelperProcess(t *testing.T) { chaos.HelperProcess(t) }
//
// The test is skipped unless the process was started by the harness; then it
// runs the workload until its standard input closes and exits the process.
func HelperProcess(t *testing.T) {
	raw := os.Getenv(helperEnv)
	if raw == "" {
		t.Skip("runs only as a holder process started by a chaos scenario")
	}
	var cfg WorkerConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "chaos helper: bad config:", err)
		os.Exit(2)
	}
	os.Exit(runHelper(cfg))
}

// emitter writes events, one JSON object a line, to file descriptor 3.
type emitter struct {
	mu   sync.Mutex
	w    io.Writer
	proc int
}

func (e *emitter) emit(ev Event) {
	if ev.T == 0 {
		ev.T = Mono()
	}
	ev.Proc = e.proc
	b, _ := json.Marshal(ev)
	b = append(b, '\n')
	e.mu.Lock()
	_, _ = e.w.Write(b)
	e.mu.Unlock()
}

func runHelper(cfg WorkerConfig) int {
	em := &emitter{w: os.NewFile(3, "events"), proc: cfg.Proc}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { // the test closes stdin to stop us
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	store, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress: []string{cfg.Store}, DisableCache: true, ForceSingleClient: true,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos helper: store:", err)
		return 2
	}
	defer store.Close()
	reg := prometheus.NewRegistry()
	sm := &sessions{cfg: cfg, em: em, reg: reg,
		log: slog.New(&hookHandler{em: em, next: slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})})}
	var wg sync.WaitGroup
	wg.Go(func() { canary(ctx, em) })
	for i, kind := range cfg.Kinds {
		w := &worker{cfg: cfg, kind: kind, em: em, sm: sm, store: fence.New(store, storeName),
			rnd: rand.New(rand.NewPCG(cfg.Seed, uint64(i)))}
		if kind == Job {
			wg.Go(func() { w.runJob(ctx) })
			continue
		}
		wg.Go(func() { w.run(ctx) })
	}
	wg.Wait()
	sm.close()
	em.emit(Event{Type: EvMetrics, Values: gather(reg)})
	return 0
}

// canary measures how late this process gets to run: it sleeps 2ms at a
// time and reports every oversleep above 5ms as a "stall" note (T: when it
// went to sleep, N: the extra delay in ns). The checker excuses deadline
// lateness that a stall of the same process explains: no timer can fire
// earlier than the process is scheduled.
func canary(ctx context.Context, em *emitter) {
	const nap = 2 * time.Millisecond
	for ctx.Err() == nil {
		t0 := Mono()
		time.Sleep(nap)
		if lag := Mono() - t0 - int64(nap); lag > int64(5*time.Millisecond) {
			em.emit(Event{Type: EvNote, T: t0, Kind: "stall", N: lag})
		}
	}
}

// gather flattens the leasehold_* counters of reg: "name{k=v,...}" -> value.
func gather(reg *prometheus.Registry) map[string]float64 {
	out := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		return out
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				if l.GetName() == "session" {
					continue
				}
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			sort.Strings(labels)
			name := mf.GetName()
			if len(labels) > 0 {
				name += "{" + strings.Join(labels, ",") + "}"
			}
			switch {
			case m.GetCounter() != nil:
				out[name] += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[name] += m.GetGauge().GetValue()
			}
		}
	}
	return out
}

// hookHandler turns the session's log records about reclaims and lease
// losses into events, and passes every record on to next.
type hookHandler struct {
	em   *emitter
	next slog.Handler
}

func (h *hookHandler) Enabled(ctx context.Context, l slog.Level) bool { return true }
func (h *hookHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &hookHandler{em: h.em, next: h.next.WithAttrs(as)}
}
func (h *hookHandler) WithGroup(g string) slog.Handler {
	return &hookHandler{em: h.em, next: h.next.WithGroup(g)}
}

func (h *hookHandler) Handle(ctx context.Context, r slog.Record) error {
	attrs := map[string]slog.Value{}
	r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value; return true })
	num := func(k string) int64 {
		v, ok := attrs[k]
		if !ok {
			return 0
		}
		n, _ := strconv.ParseInt(v.String(), 10, 64)
		return n
	}
	switch r.Message {
	case "reclaimed after Redis lost its data":
		h.em.emit(Event{Type: EvReclaim, N: num("reclaimed"), Lost: num("lost"), Detail: attrs["session"].String()})
	case "lease lost":
		h.em.emit(Event{Type: EvLost, N: num("holds"), Cause: attrs["cause"].String(), Detail: attrs["session"].String()})
	}
	if h.next.Enabled(ctx, r.Level) {
		return h.next.Handle(ctx, r)
	}
	return nil
}

// sessions keeps one live session for the process, opening a new one (with
// session.Dial, end to end) after a loss.
type sessions struct {
	cfg WorkerConfig
	em  *emitter
	reg *prometheus.Registry
	log *slog.Logger

	mu      sync.Mutex
	cur     *session.Session
	closing sync.WaitGroup
}

func (m *sessions) clientOption() rueidis.ClientOption {
	if m.cfg.MasterSet != "" {
		return rueidis.ClientOption{InitAddress: m.cfg.Addrs,
			Sentinel: rueidis.SentinelOption{MasterSet: m.cfg.MasterSet}}
	}
	// Several seeds: a Redis Cluster, which rueidis detects.
	return rueidis.ClientOption{InitAddress: m.cfg.Addrs, ForceSingleClient: len(m.cfg.Addrs) == 1}
}

func (m *sessions) get(ctx context.Context) (*session.Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cur != nil && m.cur.Err() == nil {
		return m.cur, nil
	}
	if old := m.cur; old != nil {
		m.cur = nil
		m.closing.Go(func() { _ = old.Close() })
	}
	wait := 20 * time.Millisecond
	for {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		dctx, cancel := context.WithTimeout(ctx, 2*m.cfg.TTL)
		s, err := session.Dial(dctx, m.clientOption(), session.Options{
			Namespace:    m.cfg.Namespace,
			TTL:          m.cfg.TTL,
			LockDelay:    m.cfg.LockDelay,
			RestartGrace: m.cfg.RestartGrace,
			ReplicaAck:   m.cfg.ReplicaAck,
			Shards:       m.cfg.Shards,
			Owner:        "chaos-p" + strconv.Itoa(m.cfg.Proc),
			Logger:       m.log,
			Metrics:      m.reg,
		})
		cancel()
		if err == nil {
			m.cur = s
			m.em.emit(Event{Type: EvSession, Detail: s.ID()})
			return s, nil
		}
		if ctx.Err() == nil {
			m.em.emit(Event{Type: EvFail, Kind: "session", Cause: err.Error()})
		}
		sleepCtx(ctx, wait)
		wait = min(2*wait, 500*time.Millisecond)
	}
}

func (m *sessions) close() {
	m.mu.Lock()
	if m.cur != nil {
		_ = m.cur.Close()
		m.cur = nil
	}
	m.mu.Unlock()
	m.closing.Wait()
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// worker loops acquire, hold, release on one primitive.
type worker struct {
	cfg   WorkerConfig
	kind  string
	em    *emitter
	sm    *sessions
	store *fence.Store
	rnd   *rand.Rand

	shared bool // rwmutex: the current hold is a read hold
}

func (w *worker) between(a, b time.Duration) time.Duration {
	if b <= a {
		return a
	}
	return a + time.Duration(w.rnd.Int64N(int64(b-a)))
}

func (w *worker) run(ctx context.Context) {
	for ctx.Err() == nil {
		s, err := w.sm.get(ctx)
		if err != nil {
			return
		}
		w.once(ctx, s)
	}
}

func (w *worker) once(ctx context.Context, s *session.Session) {
	actx, cancel := context.WithTimeout(ctx, w.between(w.cfg.WaitMin, w.cfg.WaitMax))
	call := Mono()
	h, res, n, err := w.acquire(actx, s)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			w.em.emit(Event{Type: EvFail, Kind: w.kind, Cause: err.Error()})
			sleepCtx(ctx, w.between(10*time.Millisecond, 60*time.Millisecond))
		}
		return
	}
	dl := holdDeadline(ctx, w.em, s, shardName(w.kind, res), h)
	ev := Event{Type: EvGrant, Kind: w.kind, Res: res, Hold: h.ID(), Token: h.Token(), N: n,
		Call: call, Deadline: monoOf(dl.Deadline())}
	if w.kind == RWMutex && w.shared {
		ev.Detail = readDetail
	}
	w.em.emit(ev)
	w.hold(ctx, dl, h, res)
}

// deadliner is what a hold's local deadline is read from: its session, or
// the lease copy of its shard when the session is sharded.
type deadliner interface{ Deadline() time.Time }

// fixedDeadline is a deadline that does not move.
type fixedDeadline time.Time

func (d fixedDeadline) Deadline() time.Time { return time.Time(d) }

// holdDeadline returns what h's local deadline is read from. A sharded
// session's Deadline is the earliest of its lease copies' (the zero time
// while it has none), and a hold depends on its own shard's copy only: the
// copy that granted it, found by name (the resource name that picks the
// shard) and checked by id. Should that copy have ended and been replaced
// already, the hold is lost: its deadline is taken as now (and noted).
func holdDeadline(ctx context.Context, em *emitter, s *session.Session, name string, h *session.Hold) deadliner {
	if s.Options().Shards <= 1 {
		return s
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	l, err := hook.LeaseFor(ctx, s, name)
	if err != nil || l.ID() != scripts.SessionOf(h.ID()) {
		em.emit(Event{Type: EvNote, Kind: "copy-gone", Hold: h.ID(), Detail: fmt.Sprintf("lease copy of shard of %q not found (%v): deadline taken as now", name, err)})
		return fixedDeadline(time.Now())
	}
	return l
}

// shardName returns the name whose shard holds a hold of kind on res: res,
// but for a pool (res is the member) and a job (its mutex's name).
func shardName(kind, res string) string {
	switch kind {
	case Pool:
		return poolName
	case Job:
		return "schedule:" + jobName
	}
	return res
}

func (w *worker) acquire(ctx context.Context, s *session.Session) (*session.Hold, string, int64, error) {
	switch w.kind {
	case Mutex:
		name := w.cfg.Mutexes[w.rnd.IntN(len(w.cfg.Mutexes))]
		h, err := mutex.New(s, name).Lock(ctx)
		return h, name, 1, err
	case Semaphore:
		n := 1 + w.rnd.Int64N(w.cfg.SemMaxN)
		h, err := semaphore.New(s, semName, w.cfg.SemLimit).Acquire(ctx, n)
		return h, semName, n, err
	case Pool:
		p := pool.New(s, poolName)
		// Members are data: a Redis that lost it needs them again.
		if err := p.Add(ctx, w.cfg.PoolKeys...); err != nil {
			return nil, "", 0, err
		}
		h, err := p.Acquire(ctx)
		if err != nil {
			return nil, "", 0, err
		}
		return h, h.Resource(), 1, nil
	case Election:
		h, err := election.New(s, elName).Campaign(ctx, "p"+strconv.Itoa(w.cfg.Proc))
		return h, elName, 1, err
	case RWMutex:
		rw := rwmutex.New(s, rwName)
		var h *session.Hold
		var err error
		if w.shared = w.rnd.Float64() < rwReadP; w.shared {
			h, err = rw.RLock(ctx)
		} else {
			h, err = rw.Lock(ctx)
		}
		return h, rwName, 1, err
	}
	return nil, "", 0, fmt.Errorf("chaos: unknown kind %q", w.kind)
}

// hold works under h until its time is up (then releases) or h ends.
func (w *worker) hold(ctx context.Context, s deadliner, h *session.Hold, res string) {
	d := w.between(w.cfg.HoldMin, w.cfg.HoldMax)
	if w.rnd.Float64() < w.cfg.LongP {
		d = w.between(w.cfg.LongMin, w.cfg.LongMax)
	}
	until := time.Now().Add(d)
	key := w.kind + "/" + res
	for {
		if !w.alive(s, h) {
			w.lost(s, h, res)
			return
		}
		// Readers share the resource, so they leave the fenced store (a
		// read-modify-write register) to the writers.
		if w.kind != Semaphore && !(w.kind == RWMutex && w.shared) && !w.fencedIncr(ctx, s, h, key) {
			w.lost(s, h, res)
			return
		}
		if ctx.Err() != nil || time.Now().After(until) {
			w.release(s, h, res)
			return
		}
		t := time.NewTimer(w.cfg.OpEvery)
		select {
		case <-h.Done():
			t.Stop()
			w.lost(s, h, res)
			return
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
}

// alive reports whether h is still held, and records a "late" event if it
// is although the send time of the session's last confirmed heartbeat + TTL
// has passed (Session.Deadline is that minus TTL/100 + 5ms).
func (w *worker) alive(s deadliner, h *session.Hold) bool {
	d1 := s.Deadline()
	now := Mono()
	err := h.Err()
	d2 := s.Deadline()
	if err != nil {
		return false
	}
	dl := monoOf(d2)
	if d1.After(d2) {
		dl = monoOf(d1)
	}
	if now > dl+int64(w.cfg.TTL/100+5*time.Millisecond) {
		w.em.emit(Event{Type: EvLate, T: now, Kind: w.kind, Hold: h.ID(), Token: h.Token(), Deadline: dl})
	}
	return true
}

// fencedIncr reads the resource's value in the fenced store with h's token,
// then writes it + 1, as work under a lock does. It reports false when h
// ended in between.
func (w *worker) fencedIncr(ctx context.Context, s deadliner, h *session.Hold, key string) bool {
	r := w.storeOp(ctx, "r", h, key, func(ctx context.Context) (int64, int64, error) {
		return storeRead(ctx, w.store, key, h.Token())
	})
	if !r.Accepted {
		return true // superseded at the store: nothing to write
	}
	if !w.alive(s, h) {
		return false
	}
	v := r.Value + 1
	w.storeOp(ctx, "w", h, key, func(ctx context.Context) (int64, int64, error) {
		return v, 0, w.store.Set(ctx, key, []byte(strconv.FormatInt(v, 10)), h.Token())
	})
	return true
}

// storeOp runs one store operation (call returns the value read or
// written, and for a read the token that wrote it) and logs it.
func (w *worker) storeOp(ctx context.Context, op string, h *session.Hold, key string,
	call func(context.Context) (int64, int64, error)) Op {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	o := Op{Key: key, Op: op, Token: h.Token(), Hold: h.ID(), Sent: Mono()}
	v, writer, err := call(ctx)
	o.Recv = Mono()
	if op == "w" {
		o.Value = v // also when refused or failed: what it tried
	}
	switch {
	case err == nil:
		o.Accepted, o.Value, o.Writer = true, v, writer
	case !errors.Is(err, fence.ErrStale):
		o.Err = err.Error()
	}
	w.em.emit(Event{Type: EvStore, T: o.Recv, Kind: w.kind, Hold: h.ID(), Token: h.Token(), Store: &o})
	return o
}

func (w *worker) release(s deadliner, h *session.Hold, res string) {
	t := Mono()
	if h.Err() != nil {
		w.lost(s, h, res)
		return
	}
	w.em.emit(Event{Type: EvEnd, T: t, How: "release", Kind: w.kind, Res: res, Hold: h.ID(), Token: h.Token(),
		Deadline: monoOf(s.Deadline())})
	ctx, cancel := context.WithTimeout(context.Background(), 2*w.cfg.TTL)
	defer cancel()
	if err := h.Release(ctx); err != nil && !errors.Is(err, session.ErrLost) {
		w.em.emit(Event{Type: EvFail, Kind: w.kind, Hold: h.ID(), Cause: "release: " + err.Error()})
	}
}

func (w *worker) lost(s deadliner, h *session.Hold, res string) {
	t := Mono()
	w.em.emit(Event{Type: EvEnd, T: t, How: "lost", Kind: w.kind, Res: res, Hold: h.ID(), Token: h.Token(),
		Deadline: monoOf(s.Deadline()), Cause: fmt.Sprint(context.Cause(h.Context()))})
}
