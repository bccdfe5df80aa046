//go:build unix

package election_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/election"
	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/session"
)

// TestHelperLeader is the child of TestFailoverPausedLeader; it skips unless
// started by it. It campaigns, reports "elected <term> <session id>" on fd 3,
// waits for its hold context to end, then reports
// "lost <ErrLeaseLost?> <deadline ns> <noticed ns> <cause>" and
// "release <ErrLost?> <error>".
func TestHelperLeader(t *testing.T) {
	spec := os.Getenv(helperEnv)
	if spec == "" {
		t.Skip("helper process of TestFailoverPausedLeader")
	}
	f := strings.Fields(spec)
	if len(f) != 3 {
		t.Fatalf("%s=%q: want <addr> <namespace> <election>", helperEnv, spec)
	}
	report := os.NewFile(helperFD, "report")
	defer report.Close()
	say := func(format string, args ...any) {
		if _, err := fmt.Fprintf(report, format+"\n", args...); err != nil {
			t.Fatalf("report: %v", err)
		}
	}
	ctx := testutil.Ctx(t, time.Minute)
	s := testutil.Dial(t, f[0], f[1], session.Options{TTL: time.Second})
	h, err := election.New(s, f[2]).Campaign(ctx, "child")
	if err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	say("elected %d %s", h.Token(), s.ID())
	select {
	case <-h.Done():
	case <-ctx.Done():
		t.Fatal("hold never ended")
	}
	noticed := time.Now()
	cause := h.Err()
	// The lease, and so the hold, was proven alive only until this instant
	// (send time of the last confirmed heartbeat + TTL*0.99 - margin).
	deadline := s.Deadline()
	say("lost %t %d %d %q", errors.Is(cause, session.ErrLeaseLost), deadline.UnixNano(), noticed.UnixNano(), cause)
	err = h.Release(ctx)
	say("release %t %q", errors.Is(err, session.ErrLost), fmt.Sprint(err))
}

// TestFailoverPausedLeader: the leader, in a child process, is paused with
// SIGSTOP; a candidate in this process is elected only after the paused
// leader's lease is over, and about when it expires; after SIGCONT the old
// leader's hold ends with ErrLeaseLost and its Release reports ErrLost.
//
// Measurement. The three processes involved (this one, the child and
// redis-server) run on one machine and share its real-time clock, so their
// wall times compare directly (the session's own deadlines use the
// monotonic clock; the child converts its deadline to wall time only to
// report it). The new leader's election time is read exactly from its term:
// a term is max(last term + 1, server TIME in µs), and the last term is far
// in the past, so the term is the Redis clock at the grant, with no client
// round trip in the measurement.
//
// What a paused leader can be promised. While stopped, the child runs no
// code at all, so its hold context cannot be canceled before SIGCONT; what
// the safety property promises a paused process is that its hold had
// expired by its own clock (the deadline after which its context is
// canceled as soon as it runs) before anyone else is elected. So the test
// asserts, besides FIFO order among the candidates:
//   - child deadline < new term's time;
//   - new term's time >= the server-side expiry of the child's lease
//     (PEXPIRETIME, read while the child is stopped);
//   - stop time + (TTL - heartbeat interval) <= new term's time <= stop
//     time + 1.5 TTL: the last heartbeat before the stop was sent at most
//     one interval before it, the server expires the lease a full TTL after
//     receiving it, and the candidates re-check when it is due;
//   - after SIGCONT the child notices the loss, with ErrLeaseLost, and its
//     Release reports ErrLost.
func TestFailoverPausedLeader(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, time.Minute)
	const (
		name = "failover"
		ttl  = time.Second
		beat = ttl / 3 // the default heartbeat interval, used by the child
		// jitter tolerates a late heartbeat timer in the child on a busy
		// machine: the interval between two heartbeats is beat plus that
		// timer's lateness.
		jitter = 30 * time.Millisecond
	)

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperLeader$", "-test.count=1", "-test.v", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), helperEnv+"="+addr+" "+ns+" "+name)
	cmd.ExtraFiles = []*os.File{w}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = killWithParent()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	lines := make(chan string, 8)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		defer close(lines)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	waited := false
	wait := func() error {
		waited = true
		err := cmd.Wait()
		<-scanned
		r.Close()
		return err
	}
	t.Cleanup(func() {
		if !waited {
			_ = cmd.Process.Signal(syscall.SIGCONT)
			_ = cmd.Process.Kill()
			_ = wait()
		}
		if t.Failed() {
			t.Logf("child output:\n%s", out.String())
		}
	})
	next := func(what string) []string {
		t.Helper()
		select {
		case l, ok := <-lines:
			f := strings.Fields(l)
			if !ok || len(f) == 0 || f[0] != what {
				t.Fatalf("child report %q, want %q", l, what)
			}
			return f
		case <-time.After(20 * time.Second):
			t.Fatalf("no %q report from the child", what)
		}
		return nil
	}

	el := next("elected")
	childTerm, _ := strconv.ParseInt(el[1], 10, 64)
	childSID := el[2]

	watcher := testutil.Dial(t, addr, ns, session.Options{TTL: 5 * time.Second})
	obs := election.New(watcher, name).Observe(ctx)
	if l := recv(t, obs, 5*time.Second); l.Session != childSID || l.Token != childTerm || l.Value != "child" {
		t.Fatalf("observed %+v, want the child (session %s, term %d)", l, childSID, childTerm)
	}

	// The candidates' own TTL plays no part in the measurement (they re-check
	// on the leader's lease); a longer one keeps them alive on a busy machine.
	a := testutil.Dial(t, addr, ns, session.Options{TTL: 5 * time.Second})
	b := testutil.Dial(t, addr, ns, session.Options{TTL: 5 * time.Second})
	probe := testutil.Client(t, addr)
	ra := campaignAsync(ctx, election.New(a, name), "a")
	testutil.WaitFor(t, ctx, func() bool { return queueLen(t, ctx, probe, ns, name) == 1 })
	rb := campaignAsync(ctx, election.New(b, name), "b")
	testutil.WaitFor(t, ctx, func() bool { return queueLen(t, ctx, probe, ns, name) == 2 })
	// While the leader is paused, a third session runs the campaign script
	// every few milliseconds (campaigns with a 5ms ctx, queued behind a and
	// b), so that an early takeover could not go unseen for lack of anyone
	// asking: the candidates alone re-check only when the leader's lease is
	// due to expire. Each round also reads when the server will expire the
	// child's lease (PEXPIRETIME, ms); it stops moving once the child is
	// stopped.
	prober := testutil.Dial(t, addr, ns, session.Options{TTL: 5 * time.Second})
	pctx, stopProber := context.WithCancel(ctx)
	proberDone := make(chan error, 1)
	var leaseExpiry int64 // the latest PEXPIRETIME of the child's lease seen
	go func() {
		e := election.New(prober, name)
		lease := "{" + ns + "}:s:" + childSID
		for pctx.Err() == nil {
			at, err := probe.Do(pctx, probe.B().Arbitrary("PEXPIRETIME").Keys(lease).Build()).AsInt64()
			if err == nil && at > leaseExpiry {
				leaseExpiry = at
			}
			actx, cancel := context.WithTimeout(pctx, 5*time.Millisecond)
			h, err := e.Campaign(actx, "prober")
			cancel()
			if err == nil {
				proberDone <- fmt.Errorf("the prober, queued last, was elected (term %d)", h.Token())
				return
			}
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				proberDone <- fmt.Errorf("prober: %w", err)
				return
			}
		}
		proberDone <- nil
	}()
	var proberErr error
	probing := true
	stopProbing := func() error {
		if probing {
			probing = false
			stopProber()
			proberErr = <-proberDone
		}
		return proberErr
	}
	defer stopProbing()

	// Read before the signal: the child may still heartbeat until the stop
	// takes effect, which only makes the true bound later than the one
	// checked.
	stopped := time.Now()
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var first result
	select {
	case first = <-ra:
	case res := <-rb:
		if res.err != nil {
			t.Fatalf("second candidate: %v", res.err)
		}
		t.Fatal("the second candidate was elected first")
	case <-time.After(10 * ttl):
		t.Fatal("no candidate elected within 10 TTLs of pausing the leader")
	}
	if first.err != nil {
		t.Fatalf("first candidate: %v", first.err)
	}
	// Read before the signal: the child may run before Signal returns.
	resumed := time.Now()
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err := stopProbing(); err != nil {
		t.Fatal(err)
	}
	elected := time.UnixMicro(first.h.Token())

	lost := next("lost")
	rel := next("release")
	if err := wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	deadlineNs, _ := strconv.ParseInt(lost[2], 10, 64)
	noticedNs, _ := strconv.ParseInt(lost[3], 10, 64)
	childDeadline, noticed := time.Unix(0, deadlineNs), time.Unix(0, noticedNs)

	t.Logf("stop → child deadline %v, → server expiry %v, → new term %v; resume → child noticed %v",
		childDeadline.Sub(stopped), time.UnixMilli(leaseExpiry).Sub(stopped), elected.Sub(stopped), noticed.Sub(resumed))
	if first.h.Token() <= childTerm {
		t.Fatalf("new term %d after the child's %d", first.h.Token(), childTerm)
	}
	if lost[1] != "true" {
		t.Fatalf("child's hold ended with %s, want ErrLeaseLost", strings.Join(lost[4:], " "))
	}
	if rel[1] != "true" {
		t.Fatalf("child's Release after the loss returned %s, want ErrLost", strings.Join(rel[2:], " "))
	}
	if !elected.After(childDeadline) {
		t.Fatalf("new leader elected %v before the paused leader's deadline", childDeadline.Sub(elected))
	}
	if expiry := time.UnixMilli(leaseExpiry); leaseExpiry <= 0 || elected.Before(expiry) {
		t.Fatalf("new leader elected %v before the paused leader's lease expired on the server (PEXPIRETIME %d)",
			expiry.Sub(elected), leaseExpiry)
	}
	if lo := stopped.Add(ttl - beat - jitter); elected.Before(lo) {
		t.Fatalf("new leader elected %v after the stop, before stop + TTL - heartbeat (%v)", elected.Sub(stopped), ttl-beat)
	}
	if hi := stopped.Add(ttl + ttl/2); elected.After(hi) {
		t.Fatalf("new leader elected %v after the stop; want about when the lease expired (<= TTL)", elected.Sub(stopped))
	}
	if noticed.Before(resumed) {
		t.Fatalf("child noticed the loss %v before SIGCONT, while paused", resumed.Sub(noticed))
	}
	if first.h.Err() != nil {
		t.Fatalf("new leader's hold ended: %v", first.h.Err())
	}

	// The observer saw the new term (after, possibly, "nobody leads").
	for {
		l := recv(t, obs, 5*time.Second)
		if l == (election.Leader{}) {
			continue
		}
		if l != (election.Leader{Value: "a", Session: a.ID(), Token: first.h.Token()}) {
			t.Fatalf("observed %+v after the failover, want candidate a's term %d", l, first.h.Token())
		}
		break
	}
	// FIFO continues: b is next.
	if err := first.h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	second := <-rb
	if second.err != nil {
		t.Fatal(second.err)
	}
	if second.h.Token() <= first.h.Token() {
		t.Fatalf("term %d after term %d", second.h.Token(), first.h.Token())
	}
}

// killWithParent asks the kernel to SIGKILL the child if this process dies,
// so that a stopped child never outlives a crashed test. Pdeathsig exists
// only on some platforms, hence reflection.
func killWithParent() *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{}
	if f := reflect.ValueOf(a).Elem().FieldByName("Pdeathsig"); f.IsValid() {
		f.Set(reflect.ValueOf(syscall.SIGKILL))
	}
	return a
}
