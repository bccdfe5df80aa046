package scripts

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/internal/redistest"
)

// batchWorld is one namespace with leases a, b, c and d, where a test sets up mutexes and compares the batch scripts with the
// single ones.
type batchWorld struct {
	t   *testing.T
	ctx context.Context
	c   rueidis.Client
	e   Env
}

func newBatchWorld(t *testing.T, ctx context.Context, c rueidis.Client) *batchWorld {
	t.Helper()
	w := &batchWorld{t: t, ctx: ctx, c: c, e: Env{C: c, K: NewKeys(redistest.Namespace(t)), TTL: time.Minute, Grace: time.Minute}}
	if err := c.Do(ctx, c.B().Set().Key(w.e.K.Epoch()).Value("0").Build()).Error(); err != nil { // intact
		t.Fatal(err)
	}
	w.e.mutexTail = w.e.formatMutexOpts()
	for _, sid := range []string{"a", "b", "c", "d"} {
		if ok, _, err := w.e.OpenLease(ctx, sid, "test", time.Minute, 0); err != nil || !ok {
			t.Fatalf("OpenLease(%s) = %v, %v", sid, ok, err)
		}
	}
	return w
}

func (w *batchWorld) do(args ...string) rueidis.RedisResult {
	w.t.Helper()
	r := w.c.Do(w.ctx, w.c.B().Arbitrary(args...).Build())
	if err := r.Error(); err != nil && !rueidis.IsRedisNil(err) {
		w.t.Fatalf("%v: %v", args, err)
	}
	return r
}

// startWorld starts a Redis server and returns a batchWorld on it, with a
// ctx for the test's calls.
func startWorld(t *testing.T) (*batchWorld, context.Context) {
	t.Helper()
	srv := redistest.Start(t, redistest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return newBatchWorld(t, ctx, srv.Client(t)), ctx
}

// calls returns how many times Redis ran command cmd (scripts' inner
// commands included) since the last CONFIG RESETSTAT.
func (w *batchWorld) calls(cmd string) int64 {
	w.t.Helper()
	info, _ := w.do("INFO", "commandstats").ToString()
	_, rest, ok := strings.Cut(info, "cmdstat_"+cmd+":calls=")
	if !ok {
		return 0
	}
	n, _, _ := strings.Cut(rest, ",")
	return mustInt(w.t, n)
}

// acquire is one attempt of hid with the resource's own script, as a hold
// id's later attempts are sent (queue "1" when wait).
func (e Env) acquire(ctx context.Context, r Resource, hid string, wait bool) (Grant, error) {
	return e.acquireCall(ctx, kindCall{r: r, hid: hid, wait: wait})
}

// grant makes hid the holder of mutex name with the single script.
func (w *batchWorld) grant(name, hid string) {
	w.t.Helper()
	if g, err := w.e.acquire(w.ctx, Resource{Kind: Mutex, Name: name}, hid, false); err != nil || g.Status != Granted {
		w.t.Fatalf("grant %s to %s: %+v, %v", name, hid, g, err)
	}
}

// state is everything the scripts wrote, tokens masked: every key of the
// namespace with its value and whether it expires, but of the leases only
// their withdrawal marks. Masked: the token in a mutex string, the tok
// field of a semaphore, a semaphore holder's token (its permits stay), a
// pool's tokens, the scores of a zset (its members stay, in order), the
// epoch marker's time.
func (w *batchWorld) state() []string {
	w.t.Helper()
	keys, err := w.c.Do(w.ctx, w.c.B().Keys().Pattern(w.e.K.Prefix+"*").Build()).AsStrSlice()
	if err != nil {
		w.t.Fatal(err)
	}
	var out []string
	for _, k := range keys {
		rel := strings.TrimPrefix(k, w.e.K.Prefix)
		ttl, _ := w.do("PTTL", k).AsInt64()
		var v any
		switch typ, _ := w.do("TYPE", k).ToString(); typ {
		case "string":
			s, _ := w.do("GET", k).ToString()
			if f := strings.Split(s, "|"); len(f) == 6 {
				f[1] = "tok"
				s = strings.Join(f, "|")
			} else if rel == keyEpoch {
				s = "time"
			}
			v = s
		case "list":
			v, _ = w.do("LRANGE", k, "0", "-1").AsStrSlice()
		case "zset":
			v, _ = w.do("ZRANGE", k, "0", "-1").AsStrSlice()
		case "hash":
			m, _ := w.do("HGETALL", k).AsStrMap()
			var f []string
			for name, x := range m {
				switch {
				case strings.HasPrefix(rel, keyLease) && !strings.HasPrefix(name, "x:"):
					continue // the lease itself: only its withdrawal marks
				case name == "tok" || strings.HasSuffix(rel, ":t"):
					x = "tok"
				case strings.HasPrefix(rel, "semh:"):
					x, _, _ = strings.Cut(x, ":") // the permits
				case strings.HasPrefix(rel, keyRWMutexReaders):
					x, _, _ = strings.Cut(x, ":") // the lock delay (then the token)
				}
				f = append(f, name+"="+x)
			}
			slices.Sort(f)
			v = f
		}
		out = append(out, fmt.Sprintf("%s=%v expires=%v", rel, v, ttl > 0 && !strings.HasPrefix(rel, keyLease)))
	}
	slices.Sort(out)
	return out
}

// TestBatchScriptsMatchSingle: a batch of acquire attempts, and one of
// releases, leaves Redis as the single scripts sent one by one in the same
// order do, and answers each call as the single script would, or R_SLOW
// without writing anything, which the single script then answers.
func TestBatchScriptsMatchSingle(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	c := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a, b, c1 := HoldID("a", 1), HoldID("b", 1), HoldID("c", 1)
	// setup builds the same mutexes in any world.
	setup := func(w *batchWorld) {
		w.grant("idle", HoldID("b", 9))
		if r, err := w.e.release(ctx, Resource{Kind: Mutex, Name: "idle"}, HoldID("b", 9), false); err != nil || r != Freed {
			t.Fatalf("release: %v, %v", r, err)
		}
		w.grant("busy", b)
		w.grant("busyq", HoldID("b", 2))
		w.grant("mine", HoldID("a", 7))
		w.grant("dead", c1)
		w.do("DEL", w.e.K.Lease("c")) // c1's lease is gone: the full path must clear it
		w.e.withdrawForTest(ctx, t, HoldID("a", 8))
	}
	attempts := []kindCall{
		{r: mutexRes("idle"), hid: a},                                        // free with a token: granted
		{r: mutexRes("fresh"), hid: HoldID("a", 2)},                          // no key: granted
		{r: mutexRes("busy"), hid: HoldID("a", 3)},                           // held, no wait: busy
		{r: mutexRes("busyq"), hid: HoldID("a", 4), wait: true},              // held, wait: queued
		{r: mutexRes("busyq"), hid: HoldID("a", 5), wait: true, first: true}, // queued behind it, unsearched
		{r: mutexRes("mine"), hid: HoldID("a", 7)},                           // a retried grant: slow
		{r: mutexRes("dead"), hid: HoldID("a", 6)},                           // a dead holder: slow
		{r: mutexRes("idle"), hid: HoldID("a", 8)},                           // withdrawn: slow
		{r: mutexRes("fresh"), hid: HoldID("a", 9), wait: true, first: true}, // granted above in this batch: queued
	}
	single, batch := newBatchWorld(t, ctx, c), newBatchWorld(t, ctx, c)
	setup(single)
	setup(batch)
	flight := func(w *batchWorld, xs []kindCall) []attemptResult { return w.e.mutexAcquireFlight(ctx, xs) }
	// 3 slow: the retried grant, the dead holder, the withdrawn hold id.
	checkAcquireBatch(t, single, batch, attempts, kindAcquire, flight, 3)

	// Releases: idle with nobody waiting, a hand-off to a live waiter, one
	// not held (slow: not found), a hand-off whose first waiter is dead
	// (slow), and the queued waiters.
	for _, w := range []*batchWorld{single, batch} {
		w.grant("handdead", HoldID("a", 20))
		if g, err := w.e.acquire(ctx, Resource{Kind: Mutex, Name: "handdead"}, HoldID("b", 20), true); err != nil || g.Status != Busy {
			t.Fatalf("queue b.20: %+v, %v", g, err)
		}
		w.do("RPOP", w.e.K.Queue(Mutex, "handdead"))
		w.do("RPUSH", w.e.K.Queue(Mutex, "handdead"), HoldID("c", 20), HoldID("b", 20))
		// handlazy's first waiter's lease does not say yet that no restart
		// grace is pending (g is "0" only once a script of that session
		// saw the grace over): the full path, which reads the epoch
		// marker, hands over.
		w.grant("handlazy", HoldID("a", 21))
		if g, err := w.e.acquire(ctx, Resource{Kind: Mutex, Name: "handlazy"}, HoldID("d", 21), true); err != nil || g.Status != Busy {
			t.Fatalf("queue d.21: %+v, %v", g, err)
		}
		w.do("HSET", w.e.K.Lease("d"), "g", "1")
	}
	// busyq's holder b.2 hands over to a.4 (a's lease is live).
	releases := []kindCall{
		{r: mutexRes("idle"), hid: a},
		{r: mutexRes("fresh"), hid: HoldID("a", 2)}, // hands over to a.9, queued behind it
		{r: mutexRes("busy"), hid: HoldID("a", 3)},  // not held by it: slow
		{r: mutexRes("handdead"), hid: HoldID("a", 20)},
		{r: mutexRes("handlazy"), hid: HoldID("a", 21)},
	}
	relFlight := func(w *batchWorld, xs []kindCall) []releaseResult { return w.e.mutexReleaseFlight(ctx, xs) }
	// 3 slow: not held, a dead first waiter, a waiter's lease with g unset.
	checkReleaseBatch(t, single, batch, releases, kindRelease, relFlight, 3)
	for _, w := range []*batchWorld{single, batch} {
		if v, _ := w.do("GET", w.e.K.Mutex("handlazy")).ToString(); !strings.HasPrefix(v, HoldID("d", 21)+"|") {
			t.Errorf("handlazy after its release: %q, want it handed to %s", v, HoldID("d", 21))
		}
	}
}

// TestBatchTokensIncrease: the tokens of one batch come from one reading of
// the clock, and each is still above the mutex's last one, also when the
// stored token is ahead of the clock.
func TestBatchTokensIncrease(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	w := newBatchWorld(t, ctx, srv.Client(t))
	ahead := fmt.Sprintf("%d", time.Now().Add(time.Hour).UnixMicro())
	w.do("SET", w.e.K.Mutex("ahead"), "|"+ahead+"|0|120000||", "PX", "60000")
	w.grant("behind", HoldID("b", 1))
	old, _ := parseTok(w.do("GET", w.e.K.Mutex("behind")))
	w.e.release(ctx, Resource{Kind: Mutex, Name: "behind"}, HoldID("b", 1), false)
	got := w.e.mutexAcquireFlight(ctx, []kindCall{{r: mutexRes("ahead"), hid: HoldID("a", 1)}, {r: mutexRes("behind"), hid: HoldID("a", 2)}})
	for _, r := range got {
		if r.err != nil || r.slow || r.g.Status != Granted {
			t.Fatalf("%+v", r)
		}
	}
	if want := mustInt(t, ahead) + 1; got[0].g.Token != want {
		t.Errorf("token after a stored one ahead of the clock: %d, want %d", got[0].g.Token, want)
	}
	if got[1].g.Token <= old {
		t.Errorf("token %d not above the last one, %d", got[1].g.Token, old)
	}
	// A hand-off in a release batch: above the mutex's last token too.
	w.do("SET", w.e.K.Mutex("ahead"), HoldID("a", 1)+"|"+fmt.Sprint(got[0].g.Token)+"|0|120000||1", "PX", "60000")
	w.do("RPUSH", w.e.K.Queue(Mutex, "ahead"), HoldID("b", 5))
	rs := w.e.mutexReleaseFlight(ctx, []kindCall{{r: mutexRes("ahead"), hid: HoldID("a", 1)}, {r: mutexRes("behind"), hid: HoldID("a", 2)}})
	for _, r := range rs {
		if r.err != nil || r.slow || r.r != Freed {
			t.Fatalf("%+v", r)
		}
	}
	v, _ := w.do("GET", w.e.K.Mutex("ahead")).ToString()
	if f := strings.Split(v, "|"); f[0] != HoldID("b", 5) || mustInt(t, f[1]) != got[0].g.Token+1 {
		t.Errorf("handed-over mutex %q, want holder %s and token %d", v, HoldID("b", 5), got[0].g.Token+1)
	}
}

func parseTok(r rueidis.RedisResult) (int64, error) {
	v, err := r.ToString()
	if err != nil {
		return 0, err
	}
	var n int64
	_, err = fmt.Sscan(strings.Split(v, "|")[1], &n)
	return n, err
}

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	var n int64
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// withdrawForTest withdraws hid as a Claim that gave up does.
func (e Env) withdrawForTest(ctx context.Context, t *testing.T, hid string) {
	t.Helper()
	if _, err := e.release(ctx, Resource{Kind: Mutex, Name: "withdrawn"}, hid, true); err != nil {
		t.Fatal(err)
	}
}

// TestAbsentMutexServesItsQueue: a mutex key can expire while its queue
// still holds a live waiter (a lock delay keeps the key only until the
// delay ends, and a waiter with a long TTL may not renew it in time).
// A newcomer must then not be granted the mutex past the waiter, on the
// fast path of the single script nor in a batch; the waiter's re-check
// gets it.
func TestAbsentMutexServesItsQueue(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	c := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, batched := range []bool{false, true} {
		w := newBatchWorld(t, ctx, c)
		m := Resource{Kind: Mutex, Name: "m"}
		w.grant("m", HoldID("c", 1))
		if g, err := w.e.acquire(ctx, m, HoldID("b", 1), true); err != nil || g.Status != Busy {
			t.Fatalf("queue b.1: %+v, %v", g, err)
		}
		w.do("DEL", w.e.K.Mutex("m")) // expired, its queue still there
		var g Grant
		if batched {
			r := w.e.mutexAcquireFlight(ctx, []kindCall{{r: mutexRes("m"), hid: HoldID("a", 1)}, {r: mutexRes("other"), hid: HoldID("a", 2)}})
			if r[0].err != nil || !r[0].slow {
				t.Fatalf("batched: newcomer %+v, want slow", r[0])
			}
		}
		g, err := w.e.acquire(ctx, m, HoldID("a", 1), false)
		if err != nil || g.Status == Granted {
			t.Fatalf("batched %v: newcomer past a live waiter: %+v, %v", batched, g, err)
		}
		if g, err := w.e.acquire(ctx, m, HoldID("b", 1), true); err != nil || g.Status != Granted {
			t.Fatalf("batched %v: the waiter's re-check: %+v, %v; want granted", batched, g, err)
		}
		if q, _ := w.do("LLEN", w.e.K.Queue(Mutex, "m")).AsInt64(); q != 0 {
			t.Fatalf("batched %v: %d entries left in the queue", batched, q)
		}
	}
}

// mutexRes is mutex name as a Resource.
func mutexRes(name string) Resource { return Resource{Kind: Mutex, Name: name} }

// TestQueueNewSkipsSearch: a waiting attempt whose hold id is sent for the
// first time (queue "2") is queued without an LPOS looking for it, on the
// fast path, in a batch and on the full path; a re-check of the same hold
// id (queue "1") searches, and keeps its place rather than queueing again.
func TestQueueNewSkipsSearch(t *testing.T) {
	w, ctx := startWorld(t)
	w.grant("m", HoldID("b", 1))
	lpos := func() int64 { return w.calls("lpos") }
	attempt := func(a kindCall, wantPos int64) {
		t.Helper()
		g, err := w.e.acquireCall(ctx, a)
		if err != nil || g.Status != Busy || g.Position != wantPos {
			t.Fatalf("attempt %+v: %+v, %v; want Busy at %d", a, g, err, wantPos)
		}
	}
	w.do("CONFIG", "RESETSTAT")
	attempt(kindCall{r: mutexRes("m"), hid: HoldID("a", 1), wait: true, first: true}, 0)
	if n := lpos(); n != 0 {
		t.Errorf("first attempt: %d LPOS, want 0", n)
	}
	attempt(kindCall{r: mutexRes("m"), hid: HoldID("a", 1), wait: true}, 0)
	if n := lpos(); n != 1 {
		t.Errorf("re-check: %d LPOS in all, want 1", n)
	}
	for i, r := range w.e.mutexAcquireFlight(ctx, []kindCall{
		{r: mutexRes("m"), hid: HoldID("a", 2), wait: true, first: true},
		{r: mutexRes("m"), hid: HoldID("a", 3), wait: true, first: true},
	}) {
		if r.err != nil || r.slow || r.g.Status != Busy || r.g.Position != int64(i+1) {
			t.Fatalf("batch attempt %d: %+v; want Busy at %d", i, r, i+1)
		}
	}
	w.do("HSET", w.e.K.Lease("a"), "g", "1") // the full path: check_caller reads the marker
	attempt(kindCall{r: mutexRes("m"), hid: HoldID("a", 4), wait: true, first: true}, 3)
	if n := lpos(); n != 1 {
		t.Errorf("after first attempts in a batch and on the full path: %d LPOS in all, want 1", n)
	}
	q, _ := w.do("LRANGE", w.e.K.Queue(Mutex, "m"), "0", "-1").AsStrSlice()
	if want := []string{HoldID("a", 1), HoldID("a", 2), HoldID("a", 3), HoldID("a", 4)}; !slices.Equal(q, want) {
		t.Errorf("queue %v, want %v", q, want)
	}
}

// TestLateFirstAttemptNotGrantedTwice: a first attempt (queue "2") that
// reaches Redis after its retry (queue "1") queued the hold id, as after a
// stall of the server or of the old connection, queues it a second time;
// the hold's release withdraws (its acquire's outcome was unknown), which
// must take that entry out before handing over, so that the mutex goes to
// the next waiter and not back to the released hold id.
func TestLateFirstAttemptNotGrantedTwice(t *testing.T) {
	w, ctx := startWorld(t)
	m := mutexRes("m")
	w.grant("m", HoldID("b", 1))
	a, d := HoldID("a", 1), HoldID("d", 1)
	for i, x := range []kindCall{
		{r: m, hid: a, wait: true},              // the retry, queued
		{r: m, hid: a, wait: true, first: true}, // the first attempt, late: queued again
		{r: m, hid: d, wait: true, first: true},
	} {
		if g, err := w.e.acquireCall(ctx, x); err != nil || g.Status != Busy || g.Position != int64(i) {
			t.Fatalf("attempt %d %+v: %+v, %v; want Busy at %d", i, x, g, err, i)
		}
	}
	if r, err := w.e.release(ctx, m, HoldID("b", 1), false); err != nil || r != Freed {
		t.Fatalf("release b.1: %v, %v", r, err)
	}
	if v, _ := w.do("GET", w.e.K.Mutex("m")).ToString(); !strings.HasPrefix(v, a+"|") {
		t.Fatalf("mutex %q, want it handed to %s", v, a)
	}
	if r, err := w.e.release(ctx, m, a, true); err != nil || r != Freed {
		t.Fatalf("withdrawing release of %s: %v, %v", a, r, err)
	}
	if v, _ := w.do("GET", w.e.K.Mutex("m")).ToString(); !strings.HasPrefix(v, d+"|") {
		t.Errorf("mutex %q after the release, want it handed to %s", v, d)
	}
	if q, _ := w.do("LRANGE", w.e.K.Queue(Mutex, "m"), "0", "-1").AsStrSlice(); len(q) != 0 {
		t.Errorf("queue %v after the hand-off, want it empty", q)
	}
}

// TestTryReadsLeaseOnlyToGrant: a mutex acquire that does not queue answers
// busy from the mutex alone when a live session holds it, without reading
// the caller's lease (also when that lease is gone); before it grants a
// free mutex it reads the lease, and a gone lease or a withdrawn hold id
// gets nothing.
func TestTryReadsLeaseOnlyToGrant(t *testing.T) {
	w, ctx := startWorld(t)
	w.grant("held", HoldID("b", 1))
	try := func(name, hid string, want Status) {
		t.Helper()
		g, err := w.e.acquireCall(ctx, kindCall{r: mutexRes(name), hid: hid})
		if err != nil || g.Status != want {
			t.Fatalf("try %s by %s: %+v, %v; want status %d", name, hid, g, err, want)
		}
	}
	w.do("CONFIG", "RESETSTAT")
	try("held", HoldID("a", 1), Busy)
	if n := w.calls("hmget"); n != 0 {
		t.Errorf("a failed try read %d leases, want none", n)
	}
	w.do("DEL", w.e.K.Lease("c"))
	try("held", HoldID("c", 1), Busy) // held by a live session: busy, whatever the caller's lease
	try("free", HoldID("c", 2), LeaseGone)
	w.e.withdrawForTest(ctx, t, HoldID("a", 8))
	try("free", HoldID("a", 8), Withdrawn)
	if n, _ := w.do("EXISTS", w.e.K.Mutex("free")).AsInt64(); n != 0 {
		t.Errorf("a try refused by its lease wrote the mutex")
	}
	w.do("HSET", w.e.K.Lease("d"), "g", "1") // not told yet that no grace runs: the full path grants
	try("free", HoldID("d", 1), Granted)
}

// TestGrantReplyForms: a grant on a mutex's fast path answers its bare
// token; the full path (here a retry by the holder) answers {1, token}; the
// client reads both as the same grant (parseAcquire), and a reply of
// neither form is an error, not a grant.
func TestGrantReplyForms(t *testing.T) {
	w, ctx := startWorld(t)
	k, _ := Mutex.spec()
	hid := HoldID("a", 1)
	call := func() rueidis.RedisMessage {
		t.Helper()
		x := k.acquire(w.e, mutexRes("m"), hid, "0")
		res, _ := w.e.execWait(ctx, x.s, x.keys, x.args)
		m, err := res.ToMessage()
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	fast := call()
	if fast.IsArray() {
		t.Fatalf("fast-path grant replied %v, want a bare token", fast)
	}
	g1, err := parseAcquire(&fast, "m")
	if err != nil || g1.Status != Granted || g1.Token <= 0 || g1.Resource != "m" {
		t.Fatalf("parseAcquire(fast grant) = %+v, %v", g1, err)
	}
	full := call() // the holder again: the full path's retry answer
	if !full.IsArray() {
		t.Fatalf("full-path grant replied %v, want {1, token}", full)
	}
	g2, err := parseAcquire(&full, "m")
	if err != nil || g2 != g1 {
		t.Fatalf("parseAcquire(full grant) = %+v, %v; want %+v", g2, err, g1)
	}
	for _, s := range []string{"granted", "0", "-1"} { // no token: a word, or a bare status code
		m, _ := w.do("ECHO", s).ToMessage()
		if g, err := parseAcquire(&m, "m"); !errors.Is(err, errReply) {
			t.Fatalf("parseAcquire(%q) = %+v, %v; want errReply", s, g, err)
		}
	}
}
