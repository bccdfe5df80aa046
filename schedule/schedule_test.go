package schedule_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/goleak"

	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/mutex"
	"github.com/leasehold/leasehold/schedule"
	"github.com/leasehold/leasehold/session"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, redistest.LeakOptions...) }

// run is one call of fn, as the test's checker saw it.
type run struct {
	node   string
	r      schedule.Run
	server time.Time // the Redis server's clock when fn started
}

// fleet runs jobs of one name on one namespace, one Manager (one process)
// per node, and checks what they ran.
type fleet struct {
	t     *testing.T
	addr  string
	ns    string
	probe rueidis.Client
	ctx   context.Context

	inside   atomic.Int32 // runs in fn now, across nodes
	overlaps atomic.Int32

	mu   sync.Mutex
	runs []run

	started chan run // every run, as it starts
}

func newFleet(t *testing.T) *fleet {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	testutil.InitEpoch(t, addr, ns)
	return &fleet{t: t, addr: addr, ns: ns, probe: testutil.Client(t, addr), ctx: testutil.Ctx(t, time.Minute),
		started: make(chan run, 100)}
}

// serverTime reads the Redis server's clock, under the test's ctx, not a
// run's: a run that starts just before the test ends has its ctx canceled
// by start's cleanup, which must not fail the read (and the test).
func (f *fleet) serverTime() time.Time {
	v, err := f.probe.Do(f.ctx, f.probe.B().Time().Build()).AsStrSlice()
	if err != nil {
		f.t.Error(err)
		return time.Time{}
	}
	s, _ := strconv.ParseInt(v[0], 10, 64)
	us, _ := strconv.ParseInt(v[1], 10, 64)
	return time.Unix(s, us*1000)
}

// manager returns a new Manager on the fleet's namespace.
func (f *fleet) manager() *session.Manager {
	m := session.NewManager(testutil.Client(f.t, f.addr), session.Options{Namespace: f.ns, TTL: 2 * time.Second})
	f.t.Cleanup(func() { m.Close() })
	return m
}

// job returns job "j" of spec with options o on a new Manager.
func (f *fleet) job(spec string, o schedule.Options) *schedule.Job {
	j, err := schedule.New(f.manager(), "j", spec, o)
	if err != nil {
		f.t.Fatal(err)
	}
	return j
}

// start runs j as node until the end of the test; body, if not nil, is
// the run's work.
func (f *fleet) start(node string, j *schedule.Job, body func(ctx context.Context, r schedule.Run) error) {
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan error, 1)
	go func() {
		done <- j.Run(ctx, func(ctx context.Context, r schedule.Run) error {
			if f.inside.Add(1) != 1 {
				f.overlaps.Add(1)
			}
			defer f.inside.Add(-1)
			got := run{node: node, r: r, server: f.serverTime()}
			f.mu.Lock()
			f.runs = append(f.runs, got)
			f.mu.Unlock()
			f.started <- got
			if body != nil {
				return body(ctx, r)
			}
			return nil
		})
	}()
	f.t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			f.t.Errorf("Run of %s = %v, want context.Canceled", node, err)
		}
	})
}

// wait returns the next n runs to start.
func (f *fleet) wait(n int) []run {
	f.t.Helper()
	var out []run
	for range n {
		select {
		case r := <-f.started:
			out = append(out, r)
		case <-f.ctx.Done():
			f.t.Fatalf("%d runs of %d started", len(out), n)
		}
	}
	return out
}

// check verifies that runs rs, in the order they started, ran distinct
// slots, each at or after its time by the server's clock, with increasing
// tokens, and that no two runs overlapped. With j (@every 1s), every slot
// between two runs that no run covered must be counted in the later run's
// Record.Skipped: a slot is skipped when it could not be claimed before the
// next one came due, which a loaded machine's stall of a second can cause.
func (f *fleet) check(rs []run, j *schedule.Job) {
	f.t.Helper()
	if n := f.overlaps.Load(); n != 0 {
		f.t.Errorf("%d overlapping runs", n)
	}
	seen := map[time.Time]string{}
	for i, r := range rs {
		if prev, ok := seen[r.r.Slot]; ok {
			f.t.Errorf("slot %v ran twice: by %s and by %s", r.r.Slot, prev, r.node)
		}
		seen[r.r.Slot] = r.node
		if r.server.Before(r.r.Slot) {
			f.t.Errorf("slot %v ran by %s at %v, early by the server's clock", r.r.Slot, r.node, r.server)
		}
		if i > 0 && (r.r.Token <= rs[i-1].r.Token || !r.r.Slot.After(rs[i-1].r.Slot)) {
			f.t.Errorf("run %d: slot %v token %d after slot %v token %d", i, r.r.Slot, r.r.Token, rs[i-1].r.Slot, rs[i-1].r.Token)
		}
	}
	if j == nil {
		return
	}
	hs, err := j.History(f.ctx, schedule.MaxHistory)
	if err != nil {
		f.t.Fatal(err)
	}
	for i := 1; i < len(rs); i++ {
		gap := int(rs[i].r.Slot.Sub(rs[i-1].r.Slot)/time.Second) - 1
		k := slices.IndexFunc(hs, func(h schedule.Record) bool { return h.Token == rs[i].r.Token })
		if k < 0 || hs[k].Skipped != gap {
			f.t.Errorf("run %d: slot %v after %v: %d slots missed, not counted in its record (%d)", i, rs[i].r.Slot, rs[i-1].r.Slot, gap, k)
		} else if gap > 0 {
			f.t.Logf("run %d: slot %v after %v: %d slots skipped, counted", i, rs[i].r.Slot, rs[i-1].r.Slot, gap)
		}
	}
}

// TestExactlyOncePerSlot: two processes run one @every 1s job; each slot
// runs once, in order, with increasing tokens, and History reports the runs
// latest first with their errors.
func TestExactlyOncePerSlot(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	j := f.job("@every 1s", schedule.Options{History: 100})
	fail := func(ctx context.Context, r schedule.Run) error {
		if r.Slot.Unix()%2 == 1 {
			return fmt.Errorf("odd slot %d", r.Slot.Unix())
		}
		return nil
	}
	f.start("a", j, fail)
	f.start("b", f.job("@every 1s", schedule.Options{}), fail)
	const n = 5
	rs := f.wait(n)
	f.check(rs, j)

	// History is read once the last run waited for has ended.
	var hs []schedule.Record
	testutil.WaitFor(t, f.ctx, func() bool {
		var err error
		hs, err = j.History(f.ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(hs, func(h schedule.Record) bool { return h.Slot.Equal(rs[n-1].r.Slot) })
		return i >= 0 && !hs[i].End.IsZero()
	})
	if len(hs) != n {
		t.Fatalf("History(%d) has %d records", n, len(hs))
	}
	for i, h := range hs {
		if i > 0 && !h.Slot.Before(hs[i-1].Slot) {
			t.Errorf("record %d: slot %v not before %v: not latest first", i, h.Slot, hs[i-1].Slot)
		}
		if h.Running || h.End.IsZero() {
			continue // a run after the ones waited for
		}
		want := ""
		if h.Slot.Unix()%2 == 1 {
			want = fmt.Sprintf("odd slot %d", h.Slot.Unix())
		}
		if h.Err != want || h.Lost || h.Start.Before(h.Slot) || h.End.Before(h.Start) || h.Owner == "" || h.Token <= 0 {
			t.Errorf("record %d = %+v, want Err %q, not lost, Slot <= Start <= End", i, h, want)
		}
	}
	last := rs[n-1]
	i := slices.IndexFunc(hs, func(h schedule.Record) bool { return h.Slot.Equal(last.r.Slot) })
	if hs[i].Token != last.r.Token || hs[i].Skipped != 0 {
		t.Errorf("record of slot %v = %+v, want token %d, none skipped", last.r.Slot, hs[i], last.r.Token)
	}
}

// skewed returns a clock off the real one by d.
func skewed(d time.Duration) func() time.Time { return func() time.Time { return time.Now().Add(d) } }

// TestClockSkew: with a process whose clock is 2 s late and one whose
// clock is 2 s early next to one on time, no slot runs twice and none runs
// before its time by the Redis server's clock.
func TestClockSkew(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	j := f.job("@every 1s", schedule.Options{History: 100})
	f.start("on time", j, nil)
	first := f.wait(1)
	f.start("late", f.job("@every 1s", schedule.WithClock(schedule.Options{}, skewed(-2*time.Second))), nil)
	f.start("early", f.job("@every 1s", schedule.WithClock(schedule.Options{}, skewed(2*time.Second))), nil)
	f.check(append(first, f.wait(5)...), j)
}

// TestClockEarlyAlone: a process whose clock is 2 s early, alone, runs
// every slot at or after its time by the Redis server's clock.
func TestClockEarlyAlone(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	j := f.job("@every 1s", schedule.WithClock(schedule.Options{History: 100}, skewed(2*time.Second)))
	f.start("early", j, nil)
	f.check(f.wait(3), j)
}

// TestOverrun: a run that outlasts its interval makes the slots that came
// due meanwhile skip, counted in Job.Skipped and Record.Skipped; what runs
// next depends on the misfire policy. Two processes run the job: the one
// that waits for the mutex while the other overruns does not run the slots
// that passed meanwhile.
func TestOverrun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		o    schedule.Options
		next time.Duration // the slot run next, after the overrun one
		// beyond: next is the least; a slot that cannot start within the
		// grace (on a loaded machine, later ones too) is skipped.
		beyond bool
	}{
		{"skip within grace", schedule.Options{}, 2 * time.Second, false},
		{"skip beyond grace", schedule.Options{Grace: 100 * time.Millisecond}, 3 * time.Second, true},
		{"run latest", schedule.Options{Misfire: schedule.RunLatest, Grace: 100 * time.Millisecond}, 2 * time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFleet(t)
			var first atomic.Bool
			overrun := func(ctx context.Context, r schedule.Run) error {
				if first.CompareAndSwap(false, true) {
					// The workload: outlast two intervals and a bit.
					time.Sleep(r.Slot.Add(2300 * time.Millisecond).Sub(f.serverTime()))
				}
				return nil
			}
			a, b := f.job("@every 1s", tc.o), f.job("@every 1s", tc.o)
			f.start("a", a, overrun)
			f.start("b", b, overrun)
			rs := f.wait(2)
			f.check(rs, nil)
			got := rs[1].r.Slot.Sub(rs[0].r.Slot)
			if got != tc.next && !(tc.beyond && got > tc.next) {
				t.Fatalf("slot run after the overrun: +%v, want +%v", got, tc.next)
			}
			skipped := int(got/time.Second) - 1
			if got := a.Skipped() + b.Skipped(); got != int64(skipped) {
				t.Errorf("Job.Skipped = %d, want %d", got, skipped)
			}
			hs, err := a.History(f.ctx, 2)
			if err != nil {
				t.Fatal(err)
			}
			if len(hs) != 2 || !hs[0].Slot.Equal(rs[1].r.Slot) || hs[0].Skipped != skipped || hs[1].Skipped != 0 {
				t.Fatalf("History = %+v, want the second run first with %d skipped", hs, skipped)
			}
			if late := hs[0].Start.Sub(hs[0].Slot); tc.beyond && late > tc.o.Grace {
				t.Errorf("slot %v claimed %v late, beyond the grace %v", hs[0].Slot, late, tc.o.Grace)
			}
		})
	}
}

// TestLossCancelsRun: when the run's hold of the job's mutex is taken
// away, fn's ctx is canceled with session.ErrLost, and the record says the
// run was lost.
func TestLossCancelsRun(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	j := f.job("@every 1s", schedule.Options{})
	causes := make(chan error, 1)
	var once atomic.Bool
	f.start("a", j, func(ctx context.Context, r schedule.Run) error {
		if once.CompareAndSwap(false, true) {
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return ctx.Err()
		}
		return nil
	})
	rs := f.wait(1)
	op := testutil.Dial(t, f.addr, f.ns, session.Options{TTL: 2 * time.Second})
	if ok, err := mutex.New(op, "schedule:j").Reset(f.ctx); err != nil || !ok {
		t.Fatalf("Reset = %v, %v", ok, err)
	}
	if err := <-causes; !errors.Is(err, session.ErrLost) {
		t.Fatalf("run's ctx cause = %v, want ErrLost", err)
	}
	testutil.WaitFor(t, f.ctx, func() bool {
		hs, err := j.History(f.ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(hs, func(h schedule.Record) bool { return h.Token == rs[0].r.Token })
		return i >= 0 && hs[i].Lost && !hs[i].End.IsZero() && hs[i].Err == context.Canceled.Error()
	})
}

// TestInvalid: bad arguments return errors matching ErrInvalid and write
// nothing to Redis.
func TestInvalid(t *testing.T) {
	f := newFleet(t)
	m := f.manager()
	for _, tc := range []struct {
		name, job, spec string
		m               *session.Manager
		o               schedule.Options
	}{
		{"nil manager", "j", "@every 1s", nil, schedule.Options{}},
		{"empty name", "", "@every 1s", m, schedule.Options{}},
		{"control character", "a\nb", "@every 1s", m, schedule.Options{}},
		{"bad spec", "j", "bogus", m, schedule.Options{}},
		{"six fields", "j", "* * * * * *", m, schedule.Options{}},
		{"no time", "j", "0 0 30 2 *", m, schedule.Options{}},
		{"interval over five years", "j", "@every 43801h", m, schedule.Options{}},
		{"interval of 200 years", "j", "@every 1752000h", m, schedule.Options{}},
		{"negative interval", "j", "@every -1h", m, schedule.Options{}},
		{"zero interval", "j", "@every 0s", m, schedule.Options{}},
		{"interval under 1s", "j", "@every 500ms", m, schedule.Options{}},
		{"interval of a fraction of a second", "j", "@every 1500ms", m, schedule.Options{}},
		{"negative grace", "j", "@hourly", m, schedule.Options{Grace: -1}},
		{"grace under 1ms", "j", "@hourly", m, schedule.Options{Grace: 999 * time.Microsecond}},
		{"grace above a year", "j", "@hourly", m, schedule.Options{Grace: session.MaxDuration + 1}},
		{"negative history", "j", "@hourly", m, schedule.Options{History: -1}},
		{"history too long", "j", "@hourly", m, schedule.Options{History: schedule.MaxHistory + 1}},
		{"misfire", "j", "@hourly", m, schedule.Options{Misfire: 7}},
	} {
		if _, err := schedule.New(tc.m, tc.job, tc.spec, tc.o); !errors.Is(err, schedule.ErrInvalid) {
			t.Errorf("%s: New = %v, want ErrInvalid", tc.name, err)
		}
	}
	if _, err := schedule.New(m, "", "@hourly", schedule.Options{}); !errors.Is(err, session.ErrInvalidName) {
		t.Errorf("New with an empty name = %v, want ErrInvalidName too", err)
	}
	j := f.job("@hourly", schedule.Options{})
	if err := j.Run(f.ctx, nil); !errors.Is(err, schedule.ErrInvalid) {
		t.Errorf("Run(nil) = %v, want ErrInvalid", err)
	}
	if _, err := j.History(f.ctx, 0); !errors.Is(err, schedule.ErrInvalid) {
		t.Errorf("History(0) = %v, want ErrInvalid", err)
	}
	keys, err := f.probe.Do(f.ctx, f.probe.B().Keys().Pattern("{"+f.ns+"}:*").Build()).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(keys, func(k string) bool { return k != "{"+f.ns+"}:epoch" }) {
		t.Errorf("keys after invalid calls: %v", keys)
	}
}
