package session_test

import (
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/leasehold/leasehold/election"
	"github.com/leasehold/leasehold/internal/hook"
	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/mutex"
	"github.com/leasehold/leasehold/pool"
	"github.com/leasehold/leasehold/semaphore"
	"github.com/leasehold/leasehold/session"
)

// graceLeftIn is the time left in the text of an ErrRestartGrace error.
var graceLeftIn = regexp.MustCompile(`^session: restart grace: grants resume in (\S+) \(`)

// TestTryDuringRestartGrace: Redis restarts empty while a session holds
// nothing. During the restart grace the calls that do not wait (TryLock,
// TryAcquire, the CLI's campaign attempt) fail with an error matching
// session.ErrRestartGrace that says how long is left, never with the
// "held" errors; a blocking Lock waits the grace out and is granted.
func TestTryDuringRestartGrace(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	const ttl = 2 * time.Second // also the restart grace
	testutil.InitEpoch(t, srv.Addr(), ns)
	opt := testutil.ClientOption(srv.Addr())
	opt.PipelineMultiplex = -1 // one connection: the first call after the restart redials it
	s, err := session.Dial(ctx, opt, session.Options{Namespace: ns, TTL: ttl, RestartGrace: ttl})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	srv.Kill()
	srv.Restart()
	restarted := time.Now()
	// A member to claim makes "exhausted" a wrong answer. The first call
	// meets the connection the restart broke.
	testutil.WaitFor(t, ctx, func() bool { return pool.New(s, "p").Add(ctx, "k") == nil })
	tries := []struct {
		name string
		try  func() (*session.Hold, error)
		busy error // the error outside a grace
	}{
		{"mutex TryLock", func() (*session.Hold, error) { return mutex.New(s, "m").TryLock(ctx) }, mutex.ErrLocked},
		{"semaphore TryAcquire", func() (*session.Hold, error) { return semaphore.New(s, "s", 1).TryAcquire(ctx, 1) }, semaphore.ErrNoPermits},
		{"pool TryAcquire", func() (*session.Hold, error) { return pool.New(s, "p").TryAcquire(ctx) }, pool.ErrExhausted},
		{"campaign without waiting", func() (*session.Hold, error) {
			return hook.Claim(ctx, s, scripts.Resource{Kind: scripts.Election, Name: "e", Value: "v"}, false)
		}, scripts.ErrBusy},
	}
	for _, tc := range tries {
		_, err := tc.try()
		if !errors.Is(err, session.ErrRestartGrace) && time.Since(restarted) >= ttl {
			t.Skipf("%v since the restart: the grace (%v) is over", time.Since(restarted), ttl)
		}
		if !errors.Is(err, session.ErrRestartGrace) || errors.Is(err, tc.busy) {
			t.Fatalf("%s during the grace: %v; want an error matching ErrRestartGrace (not %v)", tc.name, err, tc.busy)
		}
		m := graceLeftIn.FindStringSubmatch(err.Error())
		if m == nil {
			t.Fatalf("%s: error %q does not say the time left", tc.name, err)
		}
		left, perr := time.ParseDuration(m[1])
		if perr != nil || left <= 0 || left > ttl {
			t.Fatalf("%s: time left %q (%v); want within (0, %v]", tc.name, m[1], perr, ttl)
		}
		t.Logf("%s: %v", tc.name, err)
	}
	// A blocking call waits the grace out.
	h, err := mutex.New(s, "m").Lock(ctx)
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if waited := time.Since(restarted); waited < ttl-100*time.Millisecond {
		t.Fatalf("granted %v after the restart; the grace is %v", waited, ttl)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Then the tries are answered as usual.
	if h, err := pool.New(s, "p").TryAcquire(ctx); err != nil {
		t.Fatalf("pool TryAcquire after the grace: %v", err)
	} else if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := election.New(s, "e").Leader(ctx); !errors.Is(err, election.ErrNoLeader) {
		t.Fatalf("Leader after a refused campaign attempt = %v, want ErrNoLeader", err)
	}
}
