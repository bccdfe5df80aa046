package election_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/goleak"

	"github.com/leasehold/leasehold/election"
	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/session"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, redistest.LeakOptions...) }

// TestCampaignLoop: 3 candidate sessions lead, resign and campaign again for
// 300 terms. A checker (an atomic "leaders now" counter, incremented right
// after Campaign returns and decremented right before Release) sees exactly
// one leader at any time; during its term each leader is the one Leader
// reports; terms strictly increase; an observer session sees only real
// terms, in increasing order, and ends with the latest state: nobody leads.
func TestCampaignLoop(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 2*time.Minute)
	const candidates, terms = 3, 300
	watcher := testutil.Dial(t, addr, ns, session.Options{TTL: 5 * time.Second})

	obs := election.New(watcher, "loop").Observe(ctx)
	if l := recv(t, obs, 5*time.Second); l != (election.Leader{}) {
		t.Fatalf("first Observe value with nobody leading = %+v, want the zero Leader", l)
	}

	type term struct {
		token          int64
		session, value string
	}
	var (
		leaders    atomic.Int32
		violations atomic.Int32
		left       atomic.Int64
		mu         sync.Mutex
		granted    []term
		wg         sync.WaitGroup
	)
	left.Store(terms)
	ctx, cancel := context.WithCancel(ctx)
	defer wg.Wait() // no candidate outlives the test, even after a Fatal
	defer cancel()
	for i := range candidates {
		s := testutil.Dial(t, addr, ns, session.Options{TTL: 5 * time.Second})
		wg.Go(func() {
			e := election.New(s, "loop")
			for n := 0; left.Add(-1) >= 0; n++ {
				value := fmt.Sprintf("c%d-%d", i, n)
				h, err := e.Campaign(ctx, value)
				if err != nil {
					t.Errorf("candidate %d: Campaign: %v", i, err)
					return
				}
				if leaders.Add(1) != 1 {
					violations.Add(1)
				}
				mu.Lock()
				granted = append(granted, term{h.Token(), s.ID(), value})
				mu.Unlock()
				l, err := e.Leader(ctx)
				if err != nil || l != (election.Leader{Value: value, Session: s.ID(), Token: h.Token()}) {
					t.Errorf("candidate %d in term %d: Leader = %+v, %v", i, h.Token(), l, err)
				}
				if h.Err() != nil {
					t.Errorf("candidate %d: hold ended while leading: %v", i, h.Err())
				}
				leaders.Add(-1)
				if err := h.Release(ctx); err != nil {
					t.Errorf("candidate %d: Release: %v", i, err)
					return
				}
			}
		})
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()

	var seen []election.Leader
	for done := false; !done; {
		select {
		case l, ok := <-obs:
			if !ok {
				t.Fatal("Observe channel closed early")
			}
			seen = append(seen, l)
		case <-finished:
			done = true
		}
	}
	// Every candidate has resigned: the latest state is "nobody leads", and
	// the observer must end with it (it may have delivered it already: it
	// delivers a state only when it differs from the previous one).
	for len(seen) == 0 || seen[len(seen)-1] != (election.Leader{}) {
		seen = append(seen, recv(t, obs, 5*time.Second))
	}
	if t.Failed() {
		return
	}
	if n := violations.Load(); n != 0 {
		t.Fatalf("%d times more than one leader at once", n)
	}
	if len(granted) != terms {
		t.Fatalf("%d terms, want %d", len(granted), terms)
	}
	byToken := map[int64]term{}
	for i, g := range granted {
		if i > 0 && g.token <= granted[i-1].token {
			t.Fatalf("term %d at election %d after %d: not strictly increasing", g.token, i, granted[i-1].token)
		}
		byToken[g.token] = g
	}
	var prev int64
	nonzero := 0
	for _, l := range seen {
		if l == (election.Leader{}) {
			continue
		}
		nonzero++
		g, ok := byToken[l.Token]
		if !ok || l.Session != g.session || l.Value != g.value {
			t.Fatalf("observed %+v: no such term was granted (granted: %+v)", l, g)
		}
		if l.Token <= prev {
			t.Fatalf("observed term %d after term %d", l.Token, prev)
		}
		prev = l.Token
	}
	if nonzero == 0 {
		t.Fatal("the observer saw no leader at all")
	}
	t.Logf("%d terms; the observer delivered %d leaders and %d values in all", terms, nonzero, len(seen))
}

// TestObserve: Observe starts with the current leader, follows Proclaim and
// hand-overs in term order, reports the zero Leader when nobody leads, and
// its channel is closed when its ctx ends and when its session is closed.
func TestObserve(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	a := testutil.Dial(t, addr, ns, session.Options{TTL: 5 * time.Second})
	b := testutil.Dial(t, addr, ns, session.Options{TTL: 5 * time.Second})
	watcher := testutil.Dial(t, addr, ns, session.Options{TTL: 5 * time.Second})
	probe := testutil.Client(t, addr)

	ea := election.New(a, "obs")
	ha, err := ea.Campaign(ctx, "a1")
	if err != nil {
		t.Fatal(err)
	}
	octx, cancel := context.WithCancel(ctx)
	defer cancel()
	obs := election.New(watcher, "obs").Observe(octx)
	want := election.Leader{Value: "a1", Session: a.ID(), Token: ha.Token()}
	if l := recv(t, obs, 5*time.Second); l != want {
		t.Fatalf("first Observe value = %+v, want the current leader %+v", l, want)
	}

	if err := ea.Proclaim(ctx, "a2"); err != nil {
		t.Fatal(err)
	}
	want.Value = "a2"
	if l := recv(t, obs, 5*time.Second); l != want {
		t.Fatalf("after Proclaim: observed %+v, want %+v", l, want)
	}

	hb := campaignAsync(ctx, election.New(b, "obs"), "b1")
	testutil.WaitFor(t, ctx, func() bool { return queueLen(t, ctx, probe, ns, "obs") == 1 })
	if err := ha.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-hb
	if r.err != nil {
		t.Fatal(r.err)
	}
	want = election.Leader{Value: "b1", Session: b.ID(), Token: r.h.Token()}
	if l := recv(t, obs, 5*time.Second); l != want {
		t.Fatalf("after hand-over: observed %+v, want %+v", l, want)
	}
	if want.Token <= ha.Token() {
		t.Fatalf("term %d after term %d", want.Token, ha.Token())
	}

	if err := r.h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if l := recv(t, obs, 5*time.Second); l != (election.Leader{}) {
		t.Fatalf("after the last resign: observed %+v, want the zero Leader", l)
	}

	// A second observer starts with the current state: nobody leads.
	obs2 := election.New(watcher, "obs").Observe(ctx)
	if l := recv(t, obs2, 5*time.Second); l != (election.Leader{}) {
		t.Fatalf("new observer with nobody leading: %+v, want the zero Leader", l)
	}

	cancel()
	expectClosed(t, obs, 5*time.Second, "Observe channel after its ctx ended")

	if err := watcher.Close(); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, obs2, 5*time.Second, "Observe channel after its session closed")
	if _, ok := <-election.New(watcher, "obs").Observe(ctx); ok {
		t.Fatal("Observe on a closed session delivered a value")
	}
}

// TestObserveAfterPubSubKill: after the server drops every pub/sub
// connection (CLIENT KILL TYPE pubsub), the observer re-reads and
// resubscribes, and still delivers each next change within seconds, far
// sooner than its fallback re-read (the leader's lease TTL, 30s here).
func TestObserveAfterPubSubKill(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	const ttl = 30 * time.Second
	a := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: ttl})
	b := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: ttl})
	watcher := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: ttl})
	probe := testutil.Client(t, srv.Addr())

	ea := election.New(a, "kill")
	ha, err := ea.Campaign(ctx, "v1")
	if err != nil {
		t.Fatal(err)
	}
	obs := election.New(watcher, "kill").Observe(ctx)
	want := election.Leader{Value: "v1", Session: a.ID(), Token: ha.Token()}
	if l := recv(t, obs, 5*time.Second); l != want {
		t.Fatalf("first Observe value = %+v, want %+v", l, want)
	}

	for i, v := range []string{"v2", "v3"} {
		if i == 0 {
			// The observer is subscribed (it delivered after subscribing).
			n, err := probe.Do(ctx, probe.B().Arbitrary("CLIENT", "KILL").Args("TYPE", "pubsub").Build()).AsInt64()
			if err != nil || n < 1 {
				t.Fatalf("CLIENT KILL TYPE pubsub = %d, %v; want at least the observer's connection", n, err)
			}
		}
		// v2 can only be seen through the re-read that follows the drop; v3
		// only through the new subscription.
		if err := ea.Proclaim(ctx, v); err != nil {
			t.Fatal(err)
		}
		want.Value = v
		if l := recv(t, obs, 5*time.Second); l != want {
			t.Fatalf("after the pub/sub kill: observed %+v, want %+v", l, want)
		}
	}

	hb := campaignAsync(ctx, election.New(b, "kill"), "b1")
	testutil.WaitFor(t, ctx, func() bool { return queueLen(t, ctx, probe, ns, "kill") == 1 })
	if err := ha.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-hb
	if r.err != nil {
		t.Fatal(r.err)
	}
	want = election.Leader{Value: "b1", Session: b.ID(), Token: r.h.Token()}
	if l := recv(t, obs, 5*time.Second); l != want {
		t.Fatalf("after hand-over: observed %+v, want %+v", l, want)
	}
}

// TestProclaimAndLeader: only the leading Election can Proclaim, the value
// shows in Leader; non-leaders, a resigned leader and a leader whose lease
// is gone on the server get ErrNotLeader and change nothing; Leader with
// nobody leading returns ErrNoLeader.
func TestProclaimAndLeader(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	a := testutil.Dial(t, addr, ns, session.Options{TTL: 10 * time.Second})
	b := testutil.Dial(t, addr, ns, session.Options{TTL: 10 * time.Second})
	probe := testutil.Client(t, addr)

	if _, err := election.New(b, "p").Leader(ctx); !errors.Is(err, election.ErrNoLeader) {
		t.Fatalf("Leader of an election never held: %v, want ErrNoLeader", err)
	}
	ea, eb := election.New(a, "p"), election.New(b, "p")
	if err := ea.Proclaim(ctx, "x"); !errors.Is(err, election.ErrNotLeader) {
		t.Fatalf("Proclaim before any Campaign: %v, want ErrNotLeader", err)
	}
	ha, err := ea.Campaign(ctx, "a1")
	if err != nil {
		t.Fatal(err)
	}
	if ha.Resource() != "p" || ha.Token() <= 0 || ha.Err() != nil {
		t.Fatalf("hold: resource %q token %d err %v", ha.Resource(), ha.Token(), ha.Err())
	}
	leaderIs := func(want election.Leader) {
		t.Helper()
		l, err := eb.Leader(ctx)
		if err != nil || l != want {
			t.Fatalf("Leader = %+v, %v; want %+v", l, err, want)
		}
	}
	leaderIs(election.Leader{Value: "a1", Session: a.ID(), Token: ha.Token()})

	if err := ea.Proclaim(ctx, "a2"); err != nil {
		t.Fatalf("Proclaim by the leader: %v", err)
	}
	leaderIs(election.Leader{Value: "a2", Session: a.ID(), Token: ha.Token()})

	for who, e := range map[string]*election.Election{
		"another session":                eb,
		"another Election, same session": election.New(a, "p"),
	} {
		if err := e.Proclaim(ctx, "intruder"); !errors.Is(err, election.ErrNotLeader) {
			t.Fatalf("Proclaim by %s: %v, want ErrNotLeader", who, err)
		}
	}
	leaderIs(election.Leader{Value: "a2", Session: a.ID(), Token: ha.Token()})

	hb := campaignAsync(ctx, eb, "b1")
	testutil.WaitFor(t, ctx, func() bool { return queueLen(t, ctx, probe, ns, "p") == 1 })
	if err := eb.Proclaim(ctx, "queued"); !errors.Is(err, election.ErrNotLeader) {
		t.Fatalf("Proclaim by a queued candidate: %v, want ErrNotLeader", err)
	}
	if err := ha.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-hb
	if r.err != nil {
		t.Fatal(r.err)
	}
	if err := ea.Proclaim(ctx, "a3"); !errors.Is(err, election.ErrNotLeader) {
		t.Fatalf("Proclaim after resigning: %v, want ErrNotLeader", err)
	}
	leaderIs(election.Leader{Value: "b1", Session: b.ID(), Token: r.h.Token()})

	if err := r.h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := eb.Proclaim(ctx, "b2"); !errors.Is(err, election.ErrNotLeader) {
		t.Fatalf("Proclaim after resigning: %v, want ErrNotLeader", err)
	}
	if l, err := ea.Leader(ctx); !errors.Is(err, election.ErrNoLeader) {
		t.Fatalf("Leader after the last resign = %+v, %v; want ErrNoLeader", l, err)
	}

	// The leader's lease disappears on the server (as if it had expired)
	// before its session notices: the script refuses the Proclaim, and
	// Leader no longer reports it.
	c := testutil.Dial(t, addr, ns, session.Options{TTL: 10 * time.Second})
	ec := election.New(c, "p")
	hc, err := ec.Campaign(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if err := probe.Do(ctx, probe.B().Del().Key("{"+ns+"}:s:"+c.ID()).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := ec.Proclaim(ctx, "c2"); !errors.Is(err, election.ErrNotLeader) {
		t.Fatalf("Proclaim with the lease gone: %v, want ErrNotLeader (hold err %v)", err, hc.Err())
	}
	if l, err := ea.Leader(ctx); !errors.Is(err, election.ErrNoLeader) {
		t.Fatalf("Leader with the leader's lease gone = %+v, %v; want ErrNoLeader", l, err)
	}
	// And anyone can be elected at once.
	h, err := ea.Campaign(ctx, "a4")
	if err != nil {
		t.Fatal(err)
	}
	if h.Token() <= hc.Token() {
		t.Fatalf("term %d after term %d", h.Token(), hc.Token())
	}
	leaderIs(election.Leader{Value: "a4", Session: a.ID(), Token: h.Token()})
}

// TestCampaignFIFO: candidates from several sessions are elected in the
// order they arrived (arrival observed as the queue length in Redis).
func TestCampaignFIFO(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	var ss []*session.Session
	for range 3 {
		ss = append(ss, testutil.Dial(t, addr, ns, session.Options{TTL: 5 * time.Second}))
	}
	probe := testutil.Client(t, addr)
	first, err := election.New(ss[0], "fifo").Campaign(ctx, "first")
	if err != nil {
		t.Fatal(err)
	}
	const n = 12
	type win struct {
		i     int
		token int64
	}
	order := make(chan win, n)
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(ctx)
	defer wg.Wait() // no candidate outlives the test, even after a Fatal
	defer cancel()
	for i := range n {
		wg.Go(func() {
			e := election.New(ss[i%3], "fifo")
			h, err := e.Campaign(ctx, "cand"+strconv.Itoa(i))
			if err != nil {
				t.Errorf("candidate %d: %v", i, err)
				return
			}
			if l, err := e.Leader(ctx); err != nil || l.Value != "cand"+strconv.Itoa(i) || l.Token != h.Token() {
				t.Errorf("candidate %d leads but Leader = %+v, %v", i, l, err)
			}
			order <- win{i, h.Token()}
			if err := h.Release(ctx); err != nil {
				t.Errorf("candidate %d: Release: %v", i, err)
			}
		})
		testutil.WaitFor(t, ctx, func() bool { return queueLen(t, ctx, probe, ns, "fifo") == int64(i+1) })
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(order)
	want, last := 0, first.Token()
	for w := range order {
		if w.i != want {
			t.Fatalf("candidate %d elected at position %d", w.i, want)
		}
		if w.token <= last {
			t.Fatalf("term %d after term %d", w.token, last)
		}
		want, last = want+1, w.token
	}
	if want != n {
		t.Fatalf("%d candidates elected, want %d", want, n)
	}
	if l, err := election.New(ss[0], "fifo").Leader(ctx); !errors.Is(err, election.ErrNoLeader) {
		t.Fatalf("Leader after everyone resigned = %+v, %v; want ErrNoLeader", l, err)
	}
}

// TestCampaignCanceledWithdraws: a candidate whose ctx ends leaves the queue
// and is never elected.
func TestCampaignCanceledWithdraws(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	a := testutil.Dial(t, addr, ns, session.Options{TTL: 5 * time.Second})
	b := testutil.Dial(t, addr, ns, session.Options{TTL: 5 * time.Second})
	probe := testutil.Client(t, addr)
	h, err := election.New(a, "w").Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	r := campaignAsync(wctx, election.New(b, "w"), "b")
	testutil.WaitFor(t, ctx, func() bool { return queueLen(t, ctx, probe, ns, "w") == 1 })
	cancel()
	if res := <-r; !errors.Is(res.err, context.Canceled) {
		t.Fatalf("Campaign with a canceled ctx: %v, want context.Canceled", res.err)
	}
	testutil.WaitFor(t, ctx, func() bool { return queueLen(t, ctx, probe, ns, "w") == 0 })
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if l, err := election.New(a, "w").Leader(ctx); !errors.Is(err, election.ErrNoLeader) {
		t.Fatalf("Leader = %+v, %v; want ErrNoLeader (withdrawn candidate not elected)", l, err)
	}
}

// TestInvalidInput: bad names, oversized values and a closed session fail
// with errors errors.Is can match, and change nothing in Redis.
func TestInvalidInput(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 10*time.Second)
	s := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: 5 * time.Second})
	closed := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: 5 * time.Second})
	probe := testutil.Client(t, srv.Addr())

	// A real leader, so that an oversized Proclaim by the leader is tried too.
	leader := election.New(s, "ok")
	if _, err := leader.Campaign(ctx, "v"); err != nil {
		t.Fatal(err)
	}
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	dump := func() map[string]string {
		t.Helper()
		keys, err := probe.Do(ctx, probe.B().Keys().Pattern("*").Build()).AsStrSlice()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, k := range keys {
			b, err := probe.Do(ctx, probe.B().Dump().Key(k).Build()).ToString()
			if err != nil {
				t.Fatal(err)
			}
			out[k] = b
		}
		return out
	}
	before := dump()

	big := strings.Repeat("v", election.MaxValueLen+1)
	for _, name := range testutil.InvalidNames() {
		e := election.New(s, name)
		if _, err := e.Campaign(ctx, "v"); !errors.Is(err, session.ErrInvalidName) {
			t.Errorf("Campaign on name %.8q: %v, want ErrInvalidName", name, err)
		}
		if err := e.Proclaim(ctx, "v"); !errors.Is(err, session.ErrInvalidName) {
			t.Errorf("Proclaim on name %.8q: %v, want ErrInvalidName", name, err)
		}
		if _, err := e.Leader(ctx); !errors.Is(err, session.ErrInvalidName) {
			t.Errorf("Leader on name %.8q: %v, want ErrInvalidName", name, err)
		}
		if _, err := e.Reset(ctx); !errors.Is(err, session.ErrInvalidName) {
			t.Errorf("Reset on name %.8q: %v, want ErrInvalidName", name, err)
		}
		expectClosed(t, e.Observe(ctx), time.Second, "Observe on an invalid name")
	}
	if _, err := election.New(s, "big").Campaign(ctx, big); !errors.Is(err, election.ErrInvalidValue) {
		t.Errorf("Campaign with an oversized value: %v, want ErrInvalidValue", err)
	}
	if err := leader.Proclaim(ctx, big); !errors.Is(err, election.ErrInvalidValue) {
		t.Errorf("Proclaim of an oversized value by the leader: %v, want ErrInvalidValue", err)
	}
	e := election.New(closed, "ok")
	if _, err := e.Campaign(ctx, "v"); !errors.Is(err, session.ErrClosed) {
		t.Errorf("Campaign on a closed session: %v, want ErrClosed", err)
	}
	if err := e.Proclaim(ctx, "v"); !errors.Is(err, session.ErrClosed) {
		t.Errorf("Proclaim on a closed session: %v, want ErrClosed", err)
	}
	if _, err := e.Leader(ctx); !errors.Is(err, session.ErrClosed) {
		t.Errorf("Leader on a closed session: %v, want ErrClosed", err)
	}
	expectClosed(t, e.Observe(ctx), time.Second, "Observe on a closed session")

	if after := dump(); !reflect.DeepEqual(before, after) {
		t.Fatalf("invalid input changed Redis: %d keys before, %d after", len(before), len(after))
	}
	if l, err := election.New(s, "ok").Leader(ctx); err != nil || l.Value != "v" {
		t.Fatalf("Leader = %+v, %v; want the value unchanged", l, err)
	}
}

// The failover test runs its first leader in a child process (this test
// binary re-executed with -test.run=^TestHelperLeader$), so that SIGSTOP
// pauses the leader alone: its heartbeat stops while the candidates, in this
// process, keep theirs.
const helperEnv = "LEASEHOLD_ELECTION_HELPER" // "<redis addr> <namespace> <election>"

// helperFD is the child's report pipe (cmd.ExtraFiles[0]).
const helperFD = 3

type result struct {
	h   *session.Hold
	err error
}

// campaignAsync campaigns in a goroutine and delivers the outcome.
func campaignAsync(ctx context.Context, e *election.Election, value string) <-chan result {
	c := make(chan result, 1)
	go func() {
		h, err := e.Campaign(ctx, value)
		c <- result{h, err}
	}()
	return c
}

// recv returns the next value of an Observe channel.
func recv(t *testing.T, c <-chan election.Leader, d time.Duration) election.Leader {
	t.Helper()
	select {
	case l, ok := <-c:
		if !ok {
			t.Fatal("Observe channel closed")
		}
		return l
	case <-time.After(d):
		t.Fatalf("nothing observed within %v", d)
	}
	return election.Leader{}
}

// expectClosed drains c until it is closed.
func expectClosed(t *testing.T, c <-chan election.Leader, d time.Duration, what string) {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case _, ok := <-c:
			if !ok {
				return
			}
		case <-timeout:
			t.Fatalf("%s: not closed within %v", what, d)
		}
	}
}

// queueLen returns LLEN of the candidate queue {ns}:q:el:<name>.
func queueLen(t *testing.T, ctx context.Context, c rueidis.Client, ns, name string) int64 {
	t.Helper()
	n, err := c.Do(ctx, c.B().Llen().Key("{"+ns+"}:q:el:"+name).Build()).AsInt64()
	if err != nil {
		t.Fatalf("LLEN: %v", err)
	}
	return n
}

// TestDeadCandidatesSkipped: candidates whose session ends while they wait
// (closed, or lease gone) are skipped by the hand-over, and leave nothing
// behind in Redis: neither their queue entry nor their value.
func TestDeadCandidatesSkipped(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	a := testutil.Dial(t, addr, ns, session.Options{TTL: 5 * time.Second})
	probe := testutil.Client(t, addr)
	ha, err := election.New(a, "dead").Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	var waiting []<-chan result
	var sessions []*session.Session
	for i := range 3 {
		ttl := 5 * time.Second
		if i == 1 {
			ttl = time.Second // its loss is noticed within a heartbeat interval
		}
		s := testutil.Dial(t, addr, ns, session.Options{TTL: ttl})
		sessions = append(sessions, s)
		waiting = append(waiting, campaignAsync(ctx, election.New(s, "dead"), "cand"+strconv.Itoa(i)))
		testutil.WaitFor(t, ctx, func() bool { return queueLen(t, ctx, probe, ns, "dead") == int64(i+1) })
	}
	// The first candidate's session is closed while it waits; the second's
	// lease disappears on the server (as if it had expired).
	if err := sessions[0].Close(); err != nil {
		t.Fatal(err)
	}
	if r := <-waiting[0]; !errors.Is(r.err, session.ErrClosed) {
		t.Fatalf("candidate of a closed session: %v, want ErrClosed", r.err)
	}
	if err := probe.Do(ctx, probe.B().Del().Key("{"+ns+"}:s:"+sessions[1].ID()).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := ha.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-waiting[2]
	if r.err != nil {
		t.Fatalf("live candidate: %v", r.err)
	}
	if l, err := election.New(a, "dead").Leader(ctx); err != nil || l.Value != "cand2" || l.Session != sessions[2].ID() {
		t.Fatalf("Leader = %+v, %v; want the live candidate", l, err)
	}
	if r := <-waiting[1]; r.err == nil {
		t.Fatal("the candidate whose lease was gone was elected")
	}
	if err := r.h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := queueLen(t, ctx, probe, ns, "dead"); n != 0 {
		t.Fatalf("%d entries left in the candidate queue", n)
	}
	vals, err := probe.Do(ctx, probe.B().Hgetall().Key("{"+ns+"}:elc:dead").Build()).AsStrMap()
	if err != nil || len(vals) != 0 {
		t.Fatalf("candidate values left behind: %v, %v", vals, err)
	}
}

// TestObserveLeaderGone: when the leader's lease disappears and no script
// runs to announce it, the observer still reports that nobody leads, by its
// re-read when the leader's lease was due to expire.
func TestObserveLeaderGone(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	const ttl = time.Second
	a := testutil.Dial(t, addr, ns, session.Options{TTL: ttl})
	watcher := testutil.Dial(t, addr, ns, session.Options{TTL: 5 * time.Second})
	probe := testutil.Client(t, addr)
	h, err := election.New(a, "gone").Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	obs := election.New(watcher, "gone").Observe(ctx)
	if l := recv(t, obs, 5*time.Second); l.Session != a.ID() || l.Token != h.Token() {
		t.Fatalf("observed %+v, want a's term %d", l, h.Token())
	}
	if err := probe.Do(ctx, probe.B().Del().Key("{"+ns+"}:s:"+a.ID()).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	gone := time.Now()
	if l := recv(t, obs, 2*ttl); l != (election.Leader{}) {
		t.Fatalf("observed %+v after the leader's lease vanished, want the zero Leader", l)
	}
	t.Logf("nobody-leads observed %v after the lease vanished", time.Since(gone))
	select {
	case <-h.Done():
	case <-time.After(2 * ttl):
		t.Fatal("the leader's hold did not end once its lease was gone")
	}
	if !errors.Is(h.Err(), session.ErrLeaseLost) {
		t.Fatalf("leader's hold ended with %v, want ErrLeaseLost", h.Err())
	}
}

// TestRestartEmptyKeepsLeader: Redis restarts without its data while a
// leader leads. The leader, still inside its deadline, reclaims its
// leadership with the same term and can Proclaim. Nobody is elected during
// the restart grace: neither candidate b, which campaigns right after the
// restart, before its session has reclaimed its lease (and must not lose its
// session for that), nor candidate c, queued after reclaiming, when the
// leader resigns inside the grace. Once it is over, both are elected in turn.
func TestRestartEmptyKeepsLeader(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	const ttl = 2 * time.Second // also the restart grace
	a := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: ttl, RestartGrace: ttl})
	b := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: ttl, RestartGrace: ttl})
	c := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: ttl, RestartGrace: ttl})
	probe := testutil.Client(t, srv.Addr())
	ea := election.New(a, "restart")
	ha, err := ea.Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}

	srv.Kill()
	// The grace ends RestartGrace after the new process started, so no
	// earlier than this instant + TTL.
	restart := time.Now()
	srv.Restart()
	rb := campaignAsync(ctx, election.New(b, "restart"), "b")

	// The sessions' next heartbeats notice the loss and reclaim.
	want := election.Leader{Value: "a", Session: a.ID(), Token: ha.Token()}
	testutil.WaitFor(t, ctx, func() bool {
		l, err := ea.Leader(ctx)
		return err == nil && l == want
	})
	testutil.WaitFor(t, ctx, func() bool {
		n, err := probe.Do(ctx, probe.B().Exists().Key("{"+ns+"}:s:"+c.ID()).Build()).AsInt64()
		return err == nil && n == 1
	})
	if ha.Err() != nil || a.Err() != nil {
		t.Fatalf("leader's hold %v / session %v ended by a restart it could reclaim from", ha.Err(), a.Err())
	}
	if err := ea.Proclaim(ctx, "a2"); err != nil {
		t.Fatalf("Proclaim by the reclaimed leader: %v", err)
	}
	rc := campaignAsync(ctx, election.New(c, "restart"), "c")
	testutil.WaitFor(t, ctx, func() bool { return queueLen(t, ctx, probe, ns, "restart") >= 1 })
	// Resign inside the grace: nobody may be elected before it ends.
	if time.Since(restart) > ttl*3/4 {
		t.Skipf("the reclaims took %v: too late to resign inside the grace", time.Since(restart))
	}
	if err := ha.Release(ctx); err != nil {
		t.Fatalf("Release of the reclaimed leadership: %v", err)
	}
	var last int64 = ha.Token()
	for range 2 {
		var r result
		select {
		case r = <-rb:
		case r = <-rc:
		case <-time.After(3 * ttl):
			t.Fatal("a candidate was not elected after the grace")
		}
		if r.err != nil {
			t.Fatalf("candidate: %v (sessions: b %v, c %v)", r.err, b.Err(), c.Err())
		}
		if elected := time.UnixMicro(r.h.Token()); elected.Before(restart.Add(ttl)) {
			t.Fatalf("candidate elected %v after the restart, inside the %v grace", elected.Sub(restart), ttl)
		}
		if r.h.Token() <= last {
			t.Fatalf("term %d after term %d", r.h.Token(), last)
		}
		last = r.h.Token()
		if err := r.h.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if b.Err() != nil || c.Err() != nil {
		t.Fatalf("candidates' sessions ended: b %v, c %v", b.Err(), c.Err())
	}
}

// TestCampaignSurvivesDroppedConnections: the server drops every client
// connection while a candidate waits. Its re-check runs into the dead
// connection; Campaign retries instead of failing, and the candidate is
// elected when the leader resigns.
func TestCampaignSurvivesDroppedConnections(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	a := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: 5 * time.Second})
	b := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: 5 * time.Second})
	probe := testutil.Client(t, srv.Addr())
	ha, err := election.New(a, "drop").Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	rb := campaignAsync(ctx, election.New(b, "drop"), "b")
	testutil.WaitFor(t, ctx, func() bool { return queueLen(t, ctx, probe, ns, "drop") == 1 })
	// Normal connections first (the probe's own is skipped), then pub/sub:
	// dropping the latter makes the candidate re-check at once, on a
	// connection that is already dead.
	for _, typ := range []string{"normal", "pubsub"} {
		if err := probe.Do(ctx, probe.B().Arbitrary("CLIENT", "KILL").Args("TYPE", typ).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, ctx, func() bool { return queueLen(t, ctx, probe, ns, "drop") == 1 })
	select {
	case r := <-rb:
		t.Fatalf("Campaign returned while the leader leads: %v", r.err)
	default:
	}
	// The leader's own requests may meet its dead connections too (rueidis
	// notices a dead pipelined connection when a request fails on it, and a
	// client has several): a failed Release is retried by the session, and
	// at once by calling it again.
	for i := 0; ; i++ {
		err := ha.Release(ctx)
		if err == nil {
			break
		}
		if errors.Is(err, session.ErrLost) || i == 10 {
			t.Fatalf("Release: %v", err)
		}
	}
	r := <-rb
	if r.err != nil {
		t.Fatalf("Campaign after dropped connections: %v", r.err)
	}
	if l, err := election.New(a, "drop").Leader(ctx); err != nil || l.Session != b.ID() || l.Token != r.h.Token() {
		t.Fatalf("Leader = %+v, %v; want b's term %d", l, err, r.h.Token())
	}
}

// TestRestartEmptyKeepsProclaimedValue: Redis restarts without its data after
// the leader proclaimed a new value; the reclaimed leadership carries the
// proclaimed value, not the one the leader campaigned with.
func TestRestartEmptyKeepsProclaimedValue(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	a := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: 2 * time.Second})
	ea := election.New(a, "restart")
	ha, err := ea.Campaign(ctx, "campaigned")
	if err != nil {
		t.Fatal(err)
	}
	if err := ea.Proclaim(ctx, "proclaimed"); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	srv.Restart()
	var l election.Leader
	testutil.WaitFor(t, ctx, func() bool {
		l, err = ea.Leader(ctx)
		return err == nil
	})
	if ha.Err() != nil {
		t.Fatalf("leadership ended by a restart it could reclaim from: %v", ha.Err())
	}
	if want := (election.Leader{Value: "proclaimed", Session: a.ID(), Token: ha.Token()}); l != want {
		t.Fatalf("leader after the reclaim = %+v, want %+v", l, want)
	}
}
