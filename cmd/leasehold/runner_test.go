//go:build unix

package main

// End-to-end tests of the runners (lock, sem, elect, pool acquire) on real
// redis-server processes: the restart grace, the outage warning, elect
// --wait 0 and pool acquire.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/scripts"
)

// setGrace stores a restart grace of d in namespace ns's epoch marker, as
// a session that found Redis empty would (server time + grace, in ms).
func setGrace(t *testing.T, srv *redistest.Server, ns string, d time.Duration) {
	t.Helper()
	tm, err := srv.Do(t, "TIME").AsStrSlice()
	if err != nil || len(tm) != 2 {
		t.Fatalf("TIME: %v %v", tm, err)
	}
	sec, _ := strconv.ParseInt(tm[0], 10, 64)
	usec, _ := strconv.ParseInt(tm[1], 10, 64)
	until := sec*1000 + usec/1000 + d.Milliseconds()
	if err := srv.Do(t, "SET", scripts.NewKeys(ns).Epoch(), strconv.FormatInt(until, 10)+"|"+strconv.FormatInt(d.Milliseconds(), 10)).Error(); err != nil {
		t.Fatal(err)
	}
}

// TestRestartGrace: on a fresh Redis the first lock says why it waits and
// for how long, once, then runs; while a grace is pending, every runner's
// --wait 0 says so instead of "held", --wait says so before waiting and
// when it gives up, and status shows the grace.
func TestRestartGrace(t *testing.T) {
	t.Parallel()
	binary(t)
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	url := "redis://" + srv.Addr()

	stdout, stderr, code := cli(t, url, "status", "--namespace", ns)
	if code != 0 || !strings.Contains(stdout, "\nthe epoch marker is missing (Redis lost its data, or nothing used the namespace yet)") {
		t.Errorf("status on a fresh Redis: exit %d, stderr %q; stdout does not say the marker is missing:\n%s", code, stderr, stdout)
	}

	begin := time.Now()
	_, stderr, code = cli(t, url, "lock", "--namespace", ns, "--ttl", "3s", "--restart-grace", "3s", "x", "--", "true")
	took := time.Since(begin)
	if code != 0 {
		t.Fatalf("lock on a fresh Redis: exit %d: %s", code, stderr)
	}
	if !strings.HasPrefix(stderr, `leasehold: mutex "x": waiting: grants resume in `) ||
		!strings.Contains(stderr, ": the restart grace (3s) started ") || !strings.HasSuffix(stderr, "(Redis lost it, or the namespace is new)\n") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("lock on a fresh Redis: stderr %q, want one line on the restart grace", stderr)
	}
	t.Logf("lock on a fresh Redis took %v: %s", took.Round(time.Millisecond), strings.TrimSpace(stderr))

	setGrace(t, srv, ns, time.Minute)
	if _, errb, code := cli(t, url, "--namespace", ns, "pool", "add", "p", "a"); code != 0 {
		t.Fatalf("pool add: exit %d: %s", code, errb)
	}
	for _, args := range [][]string{
		{"lock", "m"},
		{"sem", "s", "--limit", "1"},
		{"elect", "e"},
		{"pool", "acquire", "p"},
	} {
		t.Run(args[0], func(t *testing.T) {
			args := append(append([]string{"--namespace", ns}, args...), "--wait", "0", "--restart-grace", "1m", "--", "true")
			_, errb, code := cli(t, url, args...)
			if code != exitNotAcquired || !strings.Contains(errb, " not acquired (--wait 0): grants resume in ") ||
				!strings.Contains(errb, ": the restart grace (1m0s) started ") || !strings.HasSuffix(errb, "(Redis lost it, or the namespace is new)\n") ||
				strings.Contains(errb, "held") || strings.Contains(errb, "free") || strings.Contains(errb, "led by") {
				t.Errorf("%q: exit %d, stderr %q; want %d and the grace", args, code, errb, exitNotAcquired)
			}
			oneLineErr(t, errb)
		})
	}

	_, stderr, code = cli(t, url, "lock", "--namespace", ns, "--wait", "300ms", "--restart-grace", "1m", "m", "--", "true")
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if code != exitNotAcquired || len(lines) != 2 ||
		!strings.HasPrefix(lines[0], `leasehold: mutex "m": waiting: grants resume in `) ||
		!strings.HasPrefix(lines[1], `leasehold: mutex "m" still not acquired after 300ms (--wait): grants resume in `) {
		t.Errorf("--wait 300ms: exit %d, stderr %q", code, stderr)
	}

	stdout, _, code = cli(t, url, "status", "--namespace", ns)
	if code != 0 || !strings.Contains(stdout, "\ngrants resume in ") || !strings.Contains(stdout, ": the restart grace (1m0s) started ") {
		t.Errorf("status during the grace: exit %d:\n%s", code, stdout)
	}
	stdout, _, code = cli(t, url, "status", "--namespace", ns, "--json")
	var st Status
	if err := json.Unmarshal([]byte(stdout), &st); code != 0 || err != nil {
		t.Fatalf("status --json: exit %d, %v: %s", code, err, stdout)
	}
	if g := st.RestartGrace; g == nil || g.LeftMs <= 50_000 || g.LeftMs > 60_000 || g.GraceMs != 60_000 || st.EpochMissing {
		t.Errorf("status --json: restart_grace %+v, epoch_missing %v", g, st.EpochMissing)
	}
}

// TestLockOutageWarning: while Redis is paused, lock warns once the lease
// is at risk (no heartbeat confirmed for half the TTL), says when Redis
// answers again, and keeps running the command.
func TestLockOutageWarning(t *testing.T) {
	t.Parallel()
	srv, url, ns := server(t)
	dir := t.TempDir()
	const ttl = 4 * time.Second
	script := `echo > "$DIR/ready"; while [ ! -e "$DIR/go" ]; do sleep 0.01; done; exit 5`
	p := startEnv(t, []string{"DIR=" + dir}, url, "lock", "--namespace", ns, "--ttl", ttl.String(), "m", "--", "sh", "-c", script)
	waitFile(t, filepath.Join(dir, "ready"), 10*time.Second)

	srv.Stop()
	stopped := time.Now()
	defer srv.Cont()
	warned := waitStderr(t, p, "leasehold: warning: no heartbeat confirmed for ", ttl)
	atRisk := time.Since(stopped)
	srv.Cont()
	waitStderr(t, p, "leasehold: Redis answers again: heartbeat confirmed after ", ttl)
	if err := writeFile(filepath.Join(dir, "go")); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(10 * time.Second); code != 5 {
		t.Fatalf("exit %d, want the command's 5; stderr %s", code, p.stderr.String())
	}
	got := p.stderr.String()
	if strings.Count(got, "warning:") != 1 || !strings.Contains(warned, `(Redis unreachable, paused or slow): mutex "m" will be lost in `) ||
		!strings.Contains(got, `at risk; mutex "m" is still held`) || strings.Contains(got, "lost mutex") {
		t.Errorf("stderr %q", got)
	}
	if atRisk > ttl {
		t.Errorf("warned %v after Redis stopped, more than the TTL", atRisk)
	}
	t.Logf("warned %v after SIGSTOP:\n%s", atRisk.Round(time.Millisecond), got)
}

// waitStderr waits until p's stderr has a line containing s and returns it.
func waitStderr(t *testing.T, p *proc, s string, d time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		out := p.errw.String()
		for line := range strings.SplitSeq(out, "\n") {
			if strings.Contains(line, s) {
				return line
			}
		}
		if time.Now().After(deadline) || p.exited() {
			t.Fatalf("stderr has no line with %q within %v (exited %v): %q", s, d, p.exited(), out)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestElectWait0: elect --wait 0 campaigns once: it leads and runs CMD when
// nobody leads, and exits 73 at once when someone does.
func TestElectWait0(t *testing.T) {
	t.Parallel()
	_, url, ns := server(t)
	if _, errb, code := cli(t, url, "elect", "--namespace", ns, "--wait", "0", "e", "--", "sh", "-c", "exit 4"); code != 4 {
		t.Fatalf("elect --wait 0 with nobody leading: exit %d, want the command's 4: %s", code, errb)
	}
	dir := t.TempDir()
	startEnv(t, []string{"DIR=" + dir}, url, "elect", "--namespace", ns, "e", "--", "sh", "-c", `echo > "$DIR/ready"; sleep 60 & wait`)
	waitFile(t, filepath.Join(dir, "ready"), 10*time.Second)
	_, errb, code := cli(t, url, "elect", "--namespace", ns, "--wait", "0", "e", "--", "true")
	if code != exitNotAcquired || errb != "leasehold: election \"e\" is led by another session (--wait 0)\n" {
		t.Errorf("elect --wait 0 with a leader: exit %d, stderr %q", code, errb)
	}
	// Nothing left queued: status counts no candidate.
	stdout, _, _ := cli(t, url, "status", "--namespace", ns, "--json")
	var st Status
	if err := json.Unmarshal([]byte(stdout), &st); err != nil || len(st.Elections) != 1 || st.Elections[0].Candidates != 0 {
		t.Errorf("status after a failed --wait 0: %v %s", err, stdout)
	}
}

// TestPoolAcquire: pool acquire runs CMD with a claimed member in
// LEASEHOLD_MEMBER and its token in LEASEHOLD_TOKEN, members are not given
// twice, --wait 0 says why it failed, and removing a held member ends the
// hold as a loss (exit 75).
func TestPoolAcquire(t *testing.T) {
	t.Parallel()
	_, url, ns := server(t)
	pool := func(args ...string) (string, string, int) {
		return cli(t, url, append([]string{"--namespace", ns, "pool"}, args...)...)
	}
	_, errb, code := pool("acquire", "--wait", "0", "empty", "--", "true")
	if code != exitNotAcquired || errb != "leasehold: pool \"empty\" has no members (see 'leasehold pool add') (--wait 0)\n" {
		t.Errorf("acquire of an empty pool: exit %d, %q", code, errb)
	}
	if _, errb, code := pool("add", "p", "a", "b"); code != 0 {
		t.Fatalf("add: exit %d %s", code, errb)
	}
	out, errb, code := pool("acquire", "p", "--", "sh", "-c", `echo "$LEASEHOLD_KIND $LEASEHOLD_NAME $LEASEHOLD_MEMBER $LEASEHOLD_TOKEN"; exit 3`)
	if f := strings.Fields(out); code != 3 || len(f) != 4 || f[0] != "pool" || f[1] != "p" || (f[2] != "a" && f[2] != "b") || f[3] == "" {
		t.Fatalf("acquire: exit %d, stdout %q, stderr %q", code, out, errb)
	}

	dir := t.TempDir()
	env := []string{"DIR=" + dir}
	hold := func(file string) *proc {
		return startEnv(t, env, url, "--namespace", ns, "pool", "acquire", "--ttl", "5s", "p", "--", "sh", "-c",
			`trap 'exit 143' TERM; echo "$LEASEHOLD_MEMBER $LEASEHOLD_TOKEN" > "$DIR/`+file+`"; sleep 60 & wait`)
	}
	p1 := hold("1")
	m1 := strings.Fields(waitFile(t, filepath.Join(dir, "1"), 10*time.Second))
	p2 := hold("2")
	m2 := strings.Fields(waitFile(t, filepath.Join(dir, "2"), 10*time.Second))
	if got := []string{m1[0], m2[0]}; !slices.Contains(got, "a") || !slices.Contains(got, "b") {
		t.Fatalf("members %v, want a and b", got)
	}
	_, errb, code = pool("acquire", "--wait", "0", "p", "--", "true")
	if code != exitNotAcquired || errb != "leasehold: pool \"p\" has no free member (--wait 0)\n" {
		t.Errorf("--wait 0 with every member held: exit %d, %q", code, errb)
	}

	if out, errb, code := pool("rm", "p", m1[0]); code != 0 || !strings.Contains(out, m1[0]+" was held by session") {
		t.Fatalf("rm: exit %d, %q %q", code, out, errb)
	}
	if code := p1.wait(10 * time.Second); code != exitLost {
		t.Fatalf("holder of the removed member: exit %d, want %d; stderr %s", code, exitLost, p1.stderr.String())
	}
	want := `leasehold: pool "p" member "` + m1[0] + `" was taken away by an operator (the pool reset, or the member removed); sent SIGTERM to the command, SIGKILL in 1.7s if it still runs`
	if got := p1.stderr.String(); !strings.Contains(got, want) {
		t.Errorf("stderr %q, want %q", got, want)
	}
	if p2.exited() {
		t.Errorf("the other holder ended: %s", p2.stderr.String())
	}
}

// writeFile creates path with one line, for a command waiting on it.
func writeFile(path string) error { return os.WriteFile(path, []byte("\n"), 0o644) }
