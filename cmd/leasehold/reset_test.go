package main

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/mutex"
	"github.com/leasehold/leasehold/pool"
	"github.com/leasehold/leasehold/semaphore"
	"github.com/leasehold/leasehold/session"
)

// TestResetSemaphoreAndPool: reset takes every permit of a semaphore and
// every held member of a pool, held by two 'leasehold' processes (two
// sessions): without --yes it only says so and exits 1; with it the
// holders' commands are signaled and they exit 75 saying why, and the
// queued waiter is granted as after a release. A second reset finds
// nothing held and changes nothing.
func TestResetSemaphoreAndPool(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind, name string
		hold       []string // the leasehold arguments that hold the resource, before "--"
		all        bool     // reset --all, else reset NAME
		would      string   // what reset without --yes says
		reason     string   // what a holder says on stderr
	}{
		{"semaphore", "s", []string{"sem", "s", "--limit", "2"}, true,
			`would reset semaphore "s": 2 of 2 permits held by 2 holds (sessions `, `semaphore "s" was reset by an operator`},
		{"pool", "p", []string{"pool", "acquire", "p"}, false,
			`would reset pool "p": 2 members of 2 held (`, `was taken away by an operator (the pool reset, or the member removed)`},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			t.Parallel()
			srv, url, ns := server(t)
			ctx := testutil.Ctx(t, 30*time.Second)
			probe := testutil.Dial(t, srv.Addr(), ns, session.Options{})
			waiters := func() int {
				if tc.kind == "pool" {
					st, err := pool.New(probe, tc.name).Stats(ctx)
					if err != nil {
						t.Fatal(err)
					}
					return st.Waiters
				}
				st, err := semaphore.New(probe, tc.name, 2).Stats(ctx)
				if err != nil {
					t.Fatal(err)
				}
				return st.Waiters
			}
			if tc.kind == "pool" {
				if err := pool.New(probe, tc.name).Add(ctx, "a", "b"); err != nil {
					t.Fatal(err)
				}
			}
			dir := t.TempDir()
			env := []string{"DIR=" + dir}
			start := func(script string) *proc {
				args := append(slices.Clone(tc.hold), "--namespace", ns, "--ttl", "5s", "--", "sh", "-c", script)
				return startEnv(t, env, url, args...)
			}
			hold := func(file string) string {
				return `trap 'exit 143' TERM; echo ready > "$DIR/` + file + `"; sleep 60 & wait`
			}
			holders := []*proc{start(hold("h1")), start(hold("h2"))}
			waitFile(t, filepath.Join(dir, "h1"), 10*time.Second)
			waitFile(t, filepath.Join(dir, "h2"), 10*time.Second)
			waiter := start(`echo "$LEASEHOLD_TOKEN" > "$DIR/w"`)
			testutil.WaitFor(t, ctx, func() bool { return waiters() == 1 })

			reset := []string{"reset", "--namespace", ns, tc.name}
			if tc.all {
				reset = []string{"reset", "--namespace", ns, "--all"}
			}
			stdout, stderr, code := cli(t, url, reset...)
			if code != exitError || !strings.Contains(stdout, tc.would) || !strings.Contains(stdout, "1 waiter") || !strings.Contains(stderr, "--yes") {
				t.Fatalf("reset without --yes: exit %d, stdout %q, stderr %q", code, stdout, stderr)
			}
			oneLineErr(t, stderr)
			if waiters() != 1 || waiter.exited() || holders[0].exited() || holders[1].exited() {
				t.Fatal("reset without --yes changed something")
			}

			stdout, stderr, code = cli(t, url, append(reset, "--yes")...)
			if want := `reset ` + tc.kind + ` "` + tc.name + `": took 2 holds`; code != 0 || !strings.Contains(stdout, want) {
				t.Fatalf("reset --yes: exit %d, stdout %q, stderr %q; want %q", code, stdout, stderr, want)
			}
			for _, p := range holders {
				if code := p.wait(10 * time.Second); code != exitLost {
					t.Fatalf("holder: exit %d, want %d; stderr %s", code, exitLost, p.stderr.String())
				}
				if got := p.stderr.String(); !strings.Contains(got, tc.reason) || strings.Contains(got, "session:") {
					t.Errorf("holder's stderr %q does not say plainly why (%q)", got, tc.reason)
				}
			}
			if code := waiter.wait(10 * time.Second); code != 0 {
				t.Fatalf("waiter: exit %d, want 0; stderr %s", code, waiter.stderr.String())
			}
			waitFile(t, filepath.Join(dir, "w"), time.Second)

			stdout, _, code = cli(t, url, append(reset, "--yes")...)
			if code != 0 || !strings.Contains(stdout, "nothing to reset") {
				t.Errorf("reset with nothing held: exit %d, %q", code, stdout)
			}
		})
	}
}

// TestResetKind: a name that is both a mutex and a semaphore is not
// guessed: reset changes nothing and asks for --kind (exit 2); --kind
// takes that one only; an unknown --kind is a usage error, and --kind
// naming a kind that has no such name says so.
func TestResetKind(t *testing.T) {
	t.Parallel()
	srv, url, ns := server(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	s := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: 900 * time.Millisecond})
	m, err := mutex.New(s, "x").TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sem, err := semaphore.New(s, "x", 1).TryAcquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"x"}, {"x", "--yes"}} {
		_, stderr, code := cli(t, url, append([]string{"reset", "--namespace", ns}, args...)...)
		if want := `"x" is a mutex and a semaphore`; code != exitUsage || !strings.Contains(stderr, want) || !strings.Contains(stderr, "--kind mutex or semaphore") {
			t.Errorf("reset %v of an ambiguous name: exit %d, stderr %q; want %d and %q", args, code, stderr, exitUsage, want)
		}
		oneLineErr(t, stderr)
	}
	for _, args := range [][]string{{"x", "--kind", "lock"}, {"--all", "--kind", ""}} {
		if _, stderr, code := cli(t, url, append([]string{"reset", "--namespace", ns}, args...)...); code != exitUsage {
			t.Errorf("reset %v: exit %d, stderr %q; want %d", args, code, stderr, exitUsage)
		}
	}
	if _, stderr, code := cli(t, url, "reset", "--namespace", ns, "x", "--kind", "pool", "--yes"); code != exitError || !strings.Contains(stderr, `no pool "x"`) {
		t.Errorf("reset --kind pool of a name no pool has: exit %d, stderr %q", code, stderr)
	}
	if m.Err() != nil || sem.Err() != nil {
		t.Fatalf("a refused reset ended a hold: mutex %v, semaphore %v", m.Err(), sem.Err())
	}
	stdout, stderr, code := cli(t, url, "reset", "--namespace", ns, "x", "--kind", "semaphore", "--yes")
	if code != 0 || !strings.Contains(stdout, `reset semaphore "x": took 1 hold`) {
		t.Fatalf("reset --kind semaphore: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	select {
	case <-sem.Done():
	case <-ctx.Done():
		t.Fatal("the semaphore hold did not end")
	}
	if !errors.Is(sem.Err(), session.ErrLost) || errors.Is(sem.Err(), session.ErrLeaseLost) || m.Err() != nil {
		t.Fatalf("after reset --kind semaphore: semaphore hold %v (want ErrLost), mutex hold %v (want held)", sem.Err(), m.Err())
	}
	stdout, _, code = cli(t, url, "reset", "--namespace", ns, "--all", "--kind", "semaphore", "--yes")
	if code != 0 || !strings.Contains(stdout, "no semaphore of namespace") || m.Err() != nil {
		t.Errorf("reset --all --kind semaphore with none held: exit %d, %q; mutex hold %v", code, stdout, m.Err())
	}
	if err := m.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
