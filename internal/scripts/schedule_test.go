package scripts_test

import (
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/internal/testutil"
)

// TestJobClaim: a slot is claimed only by the live holder of the job's
// mutex, only once its time has come on the server's clock and within the
// grace, only after the last slot run and with a higher token, and not,
// without a record, at or before the namespace's last data loss; a refused
// claim writes nothing, a granted one sets the record's and history's
// expiry, and the history keeps the latest runs.
func TestJobClaim(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	c := testutil.Client(t, addr)
	ctx := testutil.Ctx(t, 10*time.Second)
	testutil.InitEpoch(t, addr, ns)
	e := scripts.Env{C: c, K: scripts.NewKeys(ns), Grace: time.Minute}
	const job = "j"
	for _, sid := range []string{"a", "b"} {
		if ok, _, err := e.OpenLease(ctx, sid, "test", time.Minute, 0); err != nil || !ok {
			t.Fatalf("OpenLease %s = %v, %v", sid, ok, err)
		}
	}
	g, err := e.Acquire(ctx, scripts.Resource{Kind: scripts.Mutex, Name: scripts.JobMutex(job)}, scripts.HoldID("a", 1), false)
	if err != nil || g.Status != scripts.Granted {
		t.Fatalf("Acquire = %+v, %v", g, err)
	}
	do := func(cmd rueidis.Completed) rueidis.RedisResult {
		t.Helper()
		r := c.Do(ctx, cmd)
		if err := r.Error(); err != nil && !rueidis.IsRedisNil(err) {
			t.Fatal(err)
		}
		return r
	}
	// hold makes hid the mutex's holder with token tok, as a grant would.
	hold := func(hid string, tok int64) {
		do(c.B().Set().Key(e.K.Mutex(scripts.JobMutex(job))).Value(hid + "|" + strconv.FormatInt(tok, 10) + "||||").Build())
	}
	tm, err := do(c.B().Time().Build()).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	sec, _ := strconv.ParseInt(tm[0], 10, 64)
	slot := time.Unix(sec-1, 0) // due, within the grace
	cfg := scripts.JobConfig{Spec: "@every 1s", Grace: 10 * time.Second, FirstGrace: 10 * time.Second,
		Keep: 30 * time.Second, History: 2}
	read := func() scripts.JobState {
		t.Helper()
		st, err := e.JobRead(ctx, job)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	claim := func(hid string, tok int64, s time.Time, want scripts.JobClaimCode) scripts.JobClaim {
		t.Helper()
		before := read()
		got, err := e.JobClaim(ctx, job, hid, tok, s, cfg)
		if err != nil || got.Code != want {
			t.Fatalf("JobClaim(%s, %d, %v) = %+v, %v; want code %d", hid, tok, s, got, err, want)
		}
		if after := read(); want != scripts.JobClaimed && !reflect.DeepEqual(before, after) {
			t.Fatalf("a refused claim changed the job: %+v -> %+v", before, after)
		}
		return got
	}

	a1 := scripts.HoldID("a", 1)
	claim(scripts.HoldID("b", 1), g.Token, slot, scripts.JobNotHolder)
	claim(a1, g.Token, slot.Add(5*time.Second), scripts.JobEarly)
	claim(a1, g.Token, slot.Add(-20*time.Second), scripts.JobLate)

	// Without a record, a slot at or before a data loss is refused: the
	// marker was written when the loss was noticed, at until - grace.
	loss := strconv.FormatInt(slot.UnixMilli()+1000+500, 10) + "|500"
	do(c.B().Set().Key(e.K.Epoch()).Value(loss).Build())
	claim(a1, g.Token, slot, scripts.JobLostData)
	do(c.B().Set().Key(e.K.Epoch()).Value("0").Build())

	got := claim(a1, g.Token, slot, scripts.JobClaimed)
	if !got.Last.IsZero() || got.Now.Before(slot) {
		t.Fatalf("first claim = %+v, want no last slot and now after %v", got, slot)
	}
	for _, k := range []string{e.K.Job(job), e.K.JobHistory(job)} {
		if ms, err := do(c.B().Pttl().Key(k).Build()).AsInt64(); err != nil || ms <= 0 || ms > cfg.Keep.Milliseconds() {
			t.Fatalf("PTTL %s = %d, %v; want in (0, %v]", k, ms, err, cfg.Keep)
		}
	}
	claim(a1, g.Token, slot, scripts.JobDone)
	claim(a1, g.Token+1, slot.Add(-time.Millisecond), scripts.JobDone)
	hold("b.1", g.Token+1)
	claim("b.1", g.Token, slot.Add(time.Millisecond), scripts.JobDone) // token not above the last run's
	claim("b.1", g.Token+1, slot.Add(-time.Millisecond), scripts.JobDone)
	if got := claim("b.1", g.Token+1, slot.Add(time.Millisecond), scripts.JobClaimed); !got.Last.Equal(slot) {
		t.Fatalf("second claim's last slot = %v, want %v", got.Last, slot)
	}
	if ok, err := e.JobFinish(ctx, job, g.Token+1, true, "boom|bang", time.Minute); err != nil || !ok {
		t.Fatalf("JobFinish = %v, %v", ok, err)
	}
	hold("b.2", g.Token+2)
	claim("b.2", g.Token+2, slot.Add(2*time.Millisecond), scripts.JobClaimed)

	st := read()
	if st.Spec != cfg.Spec || !st.Last.Equal(slot.Add(2*time.Millisecond)) || st.LastToken != g.Token+2 || st.Holder != "b.2" {
		t.Fatalf("job = %+v", st)
	}
	if len(st.Runs) != 2 {
		t.Fatalf("%d runs kept, want History = 2: %+v", len(st.Runs), st.Runs)
	}
	r0, r1 := st.Runs[0], st.Runs[1]
	if r0.Token != g.Token+2 || !r0.End.IsZero() || r0.Lost || r0.HoldID != "b.2" || !r0.Prev.Equal(slot.Add(time.Millisecond)) {
		t.Fatalf("latest run = %+v", r0)
	}
	if r1.Token != g.Token+1 || r1.End.Before(r1.Start) || !r1.Lost || r1.Err != "boom|bang" || !r1.Prev.Equal(slot) {
		t.Fatalf("previous run = %+v", r1)
	}
	if ok, err := e.JobFinish(ctx, job, g.Token, false, "", time.Minute); err != nil || ok {
		t.Fatalf("JobFinish of a trimmed run = %v, %v; want false", ok, err)
	}
}
