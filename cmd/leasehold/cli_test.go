//go:build unix

package main

// End-to-end tests: they build the leasehold binary and run it against real
// redis-server processes (internal/redistest), each test on its own server.

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/pool"
	"github.com/leasehold/leasehold/session"
)

// server starts a Redis for one test and returns its URL and a namespace
// already marked intact (no restart grace on the fresh server).
func server(t *testing.T) (*redistest.Server, string, string) {
	t.Helper()
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	testutil.InitEpoch(t, srv.Addr(), ns)
	return srv, "redis://" + srv.Addr(), ns
}

// TestLockExcludes: commands run by concurrent `lock` processes on one mutex
// never overlap, and each gets a larger fencing token than the one before.
func TestLockExcludes(t *testing.T) {
	t.Parallel()
	_, url, ns := server(t)
	log := filepath.Join(t.TempDir(), "log")
	script := `echo "begin $$ $(date +%s%N) $LEASEHOLD_TOKEN $LEASEHOLD_NAME" >> "$LOG"; sleep 0.15; echo "end $$ $(date +%s%N)" >> "$LOG"`
	env := []string{"LOG=" + log}
	const n = 5
	procs := make([]*proc, n)
	for i := range procs {
		procs[i] = startEnv(t, env, url, "lock", "--namespace", ns, "m", "--", "sh", "-c", script)
	}
	for _, p := range procs {
		if code := p.wait(30 * time.Second); code != 0 {
			t.Fatalf("exit %d; stderr %s", code, p.stderr.String())
		}
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2*n {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), 2*n, b)
	}
	var lastEnd, lastToken int64
	for i := 0; i < len(lines); i += 2 {
		begin, end := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(begin) != 5 || begin[0] != "begin" || len(end) != 3 || end[0] != "end" || begin[1] != end[1] || begin[4] != "m" {
			t.Fatalf("interleaved or malformed at line %d:\n%s", i+1, b)
		}
		b0, _ := strconv.ParseInt(begin[2], 10, 64)
		e0, _ := strconv.ParseInt(end[2], 10, 64)
		tok, _ := strconv.ParseInt(begin[3], 10, 64)
		if b0 < lastEnd || e0 < b0 {
			t.Fatalf("critical sections overlap at line %d:\n%s", i+1, b)
		}
		if tok <= lastToken {
			t.Fatalf("token %d not above the previous %d:\n%s", tok, lastToken, b)
		}
		lastEnd, lastToken = e0, tok
	}
}

// TestLockSIGSTOP: with Redis paused, `lock` signals its command before the
// lease can expire on the server, and exits with the loss code.
func TestLockSIGSTOP(t *testing.T) {
	t.Parallel()
	srv, url, ns := server(t)
	dir := t.TempDir()
	const ttl = 2 * time.Second
	env := []string{"DIR=" + dir}
	// bash's EPOCHREALTIME reads the clock without a fork: the time noted
	// is when the signal arrived, not when a date process got to run.
	script := `trap 'echo "$EPOCHREALTIME" > "$DIR/term"; exit 143' TERM; echo "$LEASEHOLD_SESSION" > "$DIR/ready"; sleep 60 & wait`
	p := startEnv(t, env, url, "lock", "--namespace", ns, "--ttl", ttl.String(), "m", "--", "bash", "-c", script)
	sid := strings.TrimSpace(waitFile(t, filepath.Join(dir, "ready"), 10*time.Second))

	// Wait for a heartbeat to land, so that the next one is a full interval
	// away, then read when the server will expire the lease and pause Redis.
	probe := testutil.Client(t, srv.Addr())
	ctx := testutil.Ctx(t, 30*time.Second)
	lease := scripts.NewKeys(ns).Lease(sid)
	expireAt := func() int64 {
		v, err := probe.Do(ctx, probe.B().Arbitrary("PEXPIRETIME").Keys(lease).Build()).AsInt64()
		if err != nil || v <= 0 {
			t.Fatalf("PEXPIRETIME %s = %d, %v", lease, v, err)
		}
		return v
	}
	first := expireAt()
	var exp int64
	for exp = expireAt(); exp == first; exp = expireAt() {
		time.Sleep(time.Millisecond)
	}
	srv.Stop()
	stopped := time.Now()
	defer srv.Cont()

	term := waitFile(t, filepath.Join(dir, "term"), 2*ttl)
	sec, usec, _ := strings.Cut(strings.TrimSpace(term), ".")
	s64, err1 := strconv.ParseInt(sec, 10, 64)
	u64, err2 := strconv.ParseInt(usec, 10, 64)
	if err1 != nil || err2 != nil || len(usec) != 6 {
		t.Fatalf("term file %q: not EPOCHREALTIME's <s>.<µs>", term)
	}
	signalled := time.Unix(s64, u64*1000)
	srv.Cont()
	if code := p.wait(2 * ttl); code != exitLost {
		t.Fatalf("exit %d, want %d; stderr %s", code, exitLost, p.stderr.String())
	}
	margin := time.UnixMilli(exp).Sub(signalled)
	if margin <= 0 {
		t.Fatalf("the command got SIGTERM %v after the lease's server-side expiry", -margin)
	}
	if d := signalled.Sub(stopped); d > ttl {
		t.Fatalf("SIGTERM %v after SIGSTOP, more than the TTL", d)
	}
	if !strings.Contains(p.stderr.String(), `lost mutex "m"`) {
		t.Errorf("stderr %q does not tell of the loss", p.stderr.String())
	}
	t.Logf("SIGSTOP -> SIGTERM %v; SIGTERM %v before the server-side expiry", signalled.Sub(stopped).Round(time.Millisecond), margin)
}

// TestLockSIGTERMIgnored: a command that ignores SIGTERM is killed
// --kill-after later, and the lock delay (by default --kill-after + TTL/10)
// keeps the mutex from the next holder until then: no overlap. The first
// holder loses its lease because its connection (through a proxy) stalls;
// the next one talks to Redis directly.
func TestLockSIGTERMIgnored(t *testing.T) {
	t.Parallel()
	srv, url, ns := server(t)
	px := redistest.StartProxy(t, srv.Addr())
	dir := t.TempDir()
	env := []string{"DIR=" + dir}
	stubborn := `trap '' TERM; echo > "$DIR/ready"; while :; do date +%s%N >> "$DIR/first"; sleep 0.005; done`
	first := startEnv(t, env, "redis://"+px.Addr(), "lock", "--namespace", ns, "--ttl", "1s", "--kill-after", "300ms",
		"m", "--", "sh", "-c", stubborn)
	waitFile(t, filepath.Join(dir, "ready"), 10*time.Second)
	second := startEnv(t, env, url, "lock", "--namespace", ns, "--ttl", "1s", "m", "--", "sh", "-c", `date +%s%N > "$DIR/second"`)
	time.Sleep(100 * time.Millisecond) // let it queue
	px.Blackhole(true)
	blackholed := time.Now()

	if code := second.wait(10 * time.Second); code != 0 {
		t.Fatalf("second: exit %d: %s", code, second.stderr.String())
	}
	if code := first.wait(10 * time.Second); code != exitLost {
		t.Fatalf("first: exit %d, want %d: %s", code, exitLost, first.stderr.String())
	}
	firstExited := time.Since(blackholed)
	if !strings.Contains(first.stderr.String(), "sent SIGKILL") {
		t.Errorf("first's stderr %q does not tell of the SIGKILL", first.stderr.String())
	}
	lines := strings.Fields(waitFile(t, filepath.Join(dir, "first"), time.Second))
	last, _ := strconv.ParseInt(lines[len(lines)-1], 10, 64)
	begin, _ := strconv.ParseInt(strings.TrimSpace(waitFile(t, filepath.Join(dir, "second"), time.Second)), 10, 64)
	gap := time.Duration(begin - last)
	if gap <= 0 {
		t.Fatalf("the stubborn command ran %v into the next holder's command", -gap)
	}
	t.Logf("blackhole -> stubborn command's last write %v; next holder started %v after it; first leasehold exited by %v",
		time.Unix(0, last).Sub(blackholed).Round(time.Millisecond), gap.Round(time.Millisecond), firstExited.Round(time.Millisecond))
}

// TestStatusJSON: status --json lists what is held, by whom, with the tokens
// the commands were given, and the waiters.
func TestStatusJSON(t *testing.T) {
	t.Parallel()
	srv, url, ns := server(t)
	dir := t.TempDir()
	env := []string{"DIR=" + dir}
	info := func(file string) string {
		return `echo "$LEASEHOLD_SESSION $LEASEHOLD_TOKEN" > "$DIR/` + file + `"; sleep 60 & wait`
	}
	startEnv(t, env, url, "lock", "--namespace", ns, "m1", "--", "sh", "-c", info("m1"))
	m1 := strings.Fields(waitFile(t, filepath.Join(dir, "m1"), 10*time.Second))
	startEnv(t, env, url, "lock", "--namespace", ns, "m1", "--", "true") // waits
	startEnv(t, env, url, "sem", "--namespace", ns, "api", "--limit", "3", "--weight", "2", "--", "sh", "-c", info("api"))
	api := strings.Fields(waitFile(t, filepath.Join(dir, "api"), 10*time.Second))
	startEnv(t, env, url, "elect", "--namespace", ns, "boss", "--value", "first", "--", "sh", "-c", info("boss"))
	boss := strings.Fields(waitFile(t, filepath.Join(dir, "boss"), 10*time.Second))
	startEnv(t, env, url, "elect", "--namespace", ns, "boss", "--value", "second", "--", "true") // candidate

	if _, stderr, code := cli(t, url, "pool", "add", "--namespace", ns, "shards", "s0", "s1", "s2"); code != 0 {
		t.Fatalf("pool add: exit %d: %s", code, stderr)
	}
	s := testutil.Dial(t, srv.Addr(), ns, session.Options{Owner: "test-owner"})
	h, err := pool.New(s, "shards").AcquireKey(testutil.Ctx(t, 10*time.Second), "s1")
	if err != nil {
		t.Fatal(err)
	}

	var st Status
	deadline := time.Now().Add(10 * time.Second)
	for {
		stdout, stderr, code := cli(t, url, "status", "--json", "--namespace", ns)
		if code != 0 {
			t.Fatalf("status: exit %d: %s", code, stderr)
		}
		st = Status{}
		if err := json.Unmarshal([]byte(stdout), &st); err != nil {
			t.Fatalf("status --json: %v\n%s", err, stdout)
		}
		if len(st.Mutexes) == 1 && st.Mutexes[0].Waiters == 1 && len(st.Elections) == 1 && st.Elections[0].Candidates == 1 {
			break // the waiters have queued
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiters not shown: %s", stdout)
		}
		time.Sleep(20 * time.Millisecond)
	}

	if st.Namespace != ns {
		t.Errorf("namespace %q", st.Namespace)
	}
	m := st.Mutexes[0]
	if m.Name != "m1" || m.Holder == nil || m.Holder.Session != m1[0] || strconv.FormatInt(m.Holder.Token, 10) != m1[1] ||
		m.Holder.RemainingMs <= 0 || m.Holder.RemainingMs > 10_000 || m.Holder.Owner == "" {
		t.Errorf("mutex %+v (holder %+v), want session %s token %s", m, m.Holder, m1[0], m1[1])
	}
	if len(st.Semaphores) != 1 {
		t.Fatalf("semaphores %+v", st.Semaphores)
	}
	sem := st.Semaphores[0]
	if sem.Name != "api" || sem.Limit != 3 || sem.InUse != 2 || len(sem.Holders) != 1 ||
		sem.Holders[0].Session != api[0] || strconv.FormatInt(sem.Holders[0].Token, 10) != api[1] || sem.Holders[0].Permits != 2 {
		t.Errorf("semaphore %+v, want holder %v", sem, api)
	}
	el := st.Elections[0]
	if el.Name != "boss" || el.Leader == nil || el.Leader.Session != boss[0] || strconv.FormatInt(el.Leader.Token, 10) != boss[1] ||
		el.Value != "first" || el.Leader.Owner == "" {
		t.Errorf("election %+v (leader %+v), want %v", el, el.Leader, boss)
	}
	if len(st.Pools) != 1 {
		t.Fatalf("pools %+v", st.Pools)
	}
	pl := st.Pools[0]
	if pl.Name != "shards" || !slices.Equal(pl.Members, []string{"s0", "s1", "s2"}) || !slices.Equal(pl.Free, []string{"s0", "s2"}) ||
		len(pl.Held) != 1 || pl.Held[0].Key != "s1" || pl.Held[0].Session != s.ID() || pl.Held[0].Token != h.Token() ||
		pl.Held[0].Owner != "test-owner" || pl.Held[0].RemainingMs <= 0 {
		t.Errorf("pool %+v", pl)
	}
	// Sessions: the four leasehold processes (two waiting) and the test's.
	ids := map[string]SessionStatus{}
	for _, ss := range st.Sessions {
		ids[ss.ID] = ss
	}
	if len(st.Sessions) != 6 {
		t.Errorf("%d sessions, want 6: %+v", len(st.Sessions), st.Sessions)
	}
	// Every session's holds are structured: kind, name, token, holder.
	clear := func(hs []HoldStatus) []HoldStatus {
		out := slices.Clone(hs)
		for i := range out {
			if out[i].RemainingMs <= 0 || out[i].Owner == "" {
				t.Errorf("hold %+v: no time left or no owner", out[i])
			}
			out[i].RemainingMs, out[i].Owner = 0, "" // vary, checked above
		}
		return out
	}
	tok := func(s string) int64 { n, _ := strconv.ParseInt(s, 10, 64); return n }
	for _, tc := range []struct {
		sid  string
		want HoldStatus
	}{
		{m1[0], HoldStatus{Kind: "mutex", Name: "m1", Token: tok(m1[1]), Session: m1[0], Hold: m.Holder.Hold}},
		{api[0], HoldStatus{Kind: "semaphore", Name: "api", Permits: 2, Token: tok(api[1]), Session: api[0], Hold: sem.Holders[0].Hold}},
		{boss[0], HoldStatus{Kind: "election", Name: "boss", Value: "first", Token: tok(boss[1]), Session: boss[0], Hold: el.Leader.Hold}},
		{s.ID(), HoldStatus{Kind: "pool", Name: "shards", Member: "s1", Token: h.Token(), Session: s.ID(), Hold: h.ID()}},
	} {
		ss := ids[tc.sid]
		if got := clear(ss.Holds); !slices.Equal(got, []HoldStatus{tc.want}) || ss.TTLMs != 10_000 || ss.RemainingMs <= 0 {
			t.Errorf("session %s: holds %+v (ttl %d, left %d), want %+v", tc.sid, got, ss.TTLMs, ss.RemainingMs, tc.want)
		}
	}
	if ss := ids[s.ID()]; ss.Owner != "test-owner" || ss.Holds[0].Owner != "test-owner" {
		t.Errorf("test session %+v", ss)
	}

	stdout, _, code := cli(t, url, "status", "--namespace", ns)
	for _, want := range []string{"m1", m1[0], "api", "2/3", "boss", "first", "shards", "test-owner"} {
		if code != 0 || !strings.Contains(stdout, want) {
			t.Errorf("status (exit %d) does not show %q:\n%s", code, want, stdout)
		}
	}
}

// TestReset: reset without --yes changes nothing; with --yes it ends the hold:
// the lock process signals its command and exits with the loss code.
func TestReset(t *testing.T) {
	t.Parallel()
	_, url, ns := server(t)
	dir := t.TempDir()
	env := []string{"DIR=" + dir}
	script := `trap 'echo term > "$DIR/term"; exit 143' TERM; echo ready > "$DIR/ready"; sleep 60 & wait`
	p := startEnv(t, env, url, "lock", "--namespace", ns, "--ttl", "5s", "m", "--", "sh", "-c", script)
	waitFile(t, filepath.Join(dir, "ready"), 10*time.Second)

	stdout, stderr, code := cli(t, url, "reset", "--namespace", ns, "m")
	if code != exitError || !strings.Contains(stdout, `would reset mutex "m": held by session`) || !strings.Contains(stderr, "--yes") {
		t.Fatalf("reset without --yes: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	oneLineErr(t, stderr)
	if stdout, _, _ := cli(t, url, "reset", "--all", "--namespace", ns); !strings.Contains(stdout, `would reset mutex "m"`) {
		t.Fatalf("reset --all without --yes: %q", stdout)
	}
	time.Sleep(100 * time.Millisecond)
	if p.exited() {
		t.Fatalf("the lock ended without --yes: %s", p.stderr.String())
	}

	stdout, stderr, code = cli(t, url, "reset", "--namespace", ns, "m", "--yes")
	if code != 0 || !strings.Contains(stdout, `reset mutex "m": took it from session`) {
		t.Fatalf("reset --yes: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	waitFile(t, filepath.Join(dir, "term"), 5*time.Second)
	if code := p.wait(10 * time.Second); code != exitLost {
		t.Fatalf("lock exit %d, want %d; stderr %s", code, exitLost, p.stderr.String())
	}
	if got := p.stderr.String(); !strings.Contains(got, `leasehold: mutex "m" was reset by an operator; sent SIGTERM to the command, SIGKILL in 1.7s if it still runs`) ||
		strings.Contains(got, "session:") || strings.Contains(got, "taken away") {
		t.Errorf("lock's stderr %q does not say plainly why", got)
	}

	if stdout, _, code := cli(t, url, "reset", "--namespace", ns, "m", "--yes"); code != 0 || !strings.Contains(stdout, "not held") {
		t.Errorf("reset of a free mutex: exit %d, %q", code, stdout)
	}
	if stdout, _, code := cli(t, url, "reset", "--all", "--yes", "--namespace", ns); code != 0 || !strings.Contains(stdout, "nothing to reset") {
		t.Errorf("reset --all with nothing held: exit %d, %q", code, stdout)
	}
	_, stderr, code = cli(t, url, "reset", "--namespace", ns, "nosuch", "--yes")
	if code != exitError || !strings.Contains(stderr, `nothing is called "nosuch"`) {
		t.Errorf("reset of an unknown name: exit %d, %q", code, stderr)
	}
	oneLineErr(t, stderr)
}

func TestPoolCommands(t *testing.T) {
	t.Parallel()
	_, url, ns := server(t)
	pool := func(args ...string) (string, string, int) {
		return cli(t, url, append([]string{"--namespace", ns, "pool"}, args...)...)
	}
	if out, errb, code := pool("add", "shards", "s0", "s1", "s2"); code != 0 || !strings.Contains(out, `pool "shards": added 3 members`) {
		t.Fatalf("add: exit %d %q %q", code, out, errb)
	}
	if out, _, code := pool("add", "shards", "s2", "s3"); code != 0 || !strings.Contains(out, "added 1 of the 2 keys given; the other was a member already") {
		t.Fatalf("add again: exit %d %q", code, out)
	}
	if out, _, code := pool("ls", "shards"); code != 0 || out != "s0\ns1\ns2\ns3\n" {
		t.Fatalf("ls: exit %d %q", code, out)
	}
	out, _, code := pool("stats", "shards", "--json")
	var st PoolStatus
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil {
		t.Fatalf("stats --json: exit %d, %v: %q", code, err, out)
	}
	if len(st.Members) != 4 || len(st.Free) != 4 || len(st.Held) != 0 || st.Waiters != 0 {
		t.Errorf("stats %+v", st)
	}
	if out, _, code := pool("stats", "shards"); code != 0 || !strings.Contains(out, "4 members, 0 held, 4 free, 0 waiting") {
		t.Errorf("stats: exit %d %q", code, out)
	}
	if out, _, code := pool("rm", "shards", "s1"); code != 0 || !strings.Contains(out, "removed 1") {
		t.Fatalf("rm: exit %d %q", code, out)
	}
	_, errb, code := pool("rm", "shards", "s0", "nosuch")
	if code != exitError || !strings.Contains(errb, "nosuch") {
		t.Errorf("rm of a non-member: exit %d %q", code, errb)
	}
	oneLineErr(t, errb)
	if out, _, code := pool("ls", "shards"); code != 0 || out != "s0\ns2\ns3\n" {
		t.Fatalf("ls after rm: exit %d %q", code, out)
	}
}

// TestExitCodes: CMD's exit code passes through; a held mutex gives 73 with
// --wait 0 or when --wait elapses; Redis or CMD problems give one line.
func TestExitCodes(t *testing.T) {
	t.Parallel()
	_, url, ns := server(t)
	if _, errb, code := cli(t, url, "lock", "--namespace", ns, "m", "--", "sh", "-c", "exit 7"); code != 7 || errb != "" {
		t.Fatalf("exit %d, stderr %q, want 7 and nothing", code, errb)
	}
	if _, _, code := cli(t, url, "lock", "--namespace", ns, "m", "--", "sh", "-c", "kill -USR1 $$"); code != 128+int(syscall.SIGUSR1) {
		t.Fatalf("killed by SIGUSR1: exit %d, want %d", code, 128+int(syscall.SIGUSR1))
	}
	dir := t.TempDir()
	env := []string{"DIR=" + dir}
	startEnv(t, env, url, "lock", "--namespace", ns, "m", "--", "sh", "-c", `echo > "$DIR/ready"; sleep 60 & wait`)
	waitFile(t, filepath.Join(dir, "ready"), 10*time.Second)

	_, errb, code := cli(t, url, "lock", "--namespace", ns, "--wait", "0", "m", "--", "true")
	if code != exitNotAcquired || !strings.Contains(errb, "held by another session") {
		t.Errorf("--wait 0: exit %d, %q", code, errb)
	}
	oneLineErr(t, errb)
	begin := time.Now()
	_, errb, code = cli(t, url, "lock", "--namespace", ns, "--wait", "300ms", "m", "--", "true")
	if d := time.Since(begin); code != exitNotAcquired || !strings.Contains(errb, "after 300ms") || d < 300*time.Millisecond {
		t.Errorf("--wait 300ms: exit %d after %v, %q", code, d, errb)
	}
	oneLineErr(t, errb)
	_, errb, code = cli(t, url, "sem", "--namespace", ns, "--limit", "1", "--wait", "0", "s", "--", "sh", "-c", "exit 0")
	if code != 0 {
		t.Errorf("sem: exit %d, %q", code, errb)
	}
	_, errb, code = cli(t, url, "sem", "--namespace", ns, "--limit", "2", "s", "--", "true")
	if code != exitUsage || !strings.Contains(errb, `--limit 2 differs from the limit 1 stored in Redis for semaphore "s"`) {
		t.Errorf("sem with another limit: exit %d, %q; want %d", code, errb, exitUsage)
	}
	oneLineErr(t, errb)

	for _, tc := range []struct {
		url  string
		args []string
		code int
		want string
	}{
		{url, []string{"lock", "m2", "--", "/nonexistent/command"}, exitNotFound, "/nonexistent/command"},
		{url, []string{"lock", "m2", "--", "no-such-command-anywhere"}, exitNotFound, "not found"},
		{url, []string{"lock", "m2", "--", dir}, exitNotExec, dir},
		{"redis://127.0.0.1:1", []string{"lock", "m", "--", "true"}, exitFailed, "127.0.0.1:1"},
		{"redis://127.0.0.1:1", []string{"status"}, exitError, "127.0.0.1:1"},
		{"bogus://x", []string{"status"}, exitUsage, "invalid URL scheme"},
	} {
		_, errb, code := cli(t, tc.url, append([]string{"--namespace", ns}, tc.args...)...)
		if code != tc.code || !strings.Contains(errb, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errb, tc.code, tc.want)
		}
		oneLineErr(t, errb)
	}
}

// TestSemLimit: commands run by `sem --limit 2` processes never number more
// than 2 at once.
func TestSemLimit(t *testing.T) {
	t.Parallel()
	_, url, ns := server(t)
	log := filepath.Join(t.TempDir(), "log")
	env := []string{"LOG=" + log}
	script := `echo "+ $(date +%s%N)" >> "$LOG"; sleep 0.2; echo "- $(date +%s%N)" >> "$LOG"`
	var procs []*proc
	for range 5 {
		procs = append(procs, startEnv(t, env, url, "sem", "--namespace", ns, "--limit", "2", "s", "--", "sh", "-c", script))
	}
	for _, p := range procs {
		if code := p.wait(30 * time.Second); code != 0 {
			t.Fatalf("exit %d: %s", code, p.stderr.String())
		}
	}
	b, _ := os.ReadFile(log)
	type ev struct {
		at int64
		d  int
	}
	var evs []ev
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(l)
		at, _ := strconv.ParseInt(f[1], 10, 64)
		evs = append(evs, ev{at, map[string]int{"+": 1, "-": -1}[f[0]]})
	}
	slices.SortFunc(evs, func(a, b ev) int {
		if a.at != b.at {
			return int(a.at - b.at)
		}
		return a.d - b.d
	})
	use, top := 0, 0
	for _, e := range evs {
		use += e.d
		top = max(top, use)
	}
	if len(evs) != 10 || top != 2 {
		t.Fatalf("%d events, at most %d at once, want 10 and 2:\n%s", len(evs), top, b)
	}
}

// TestSemLimitCommand: sem-limit shows the stored limit, sets one that
// overrides every user's --limit (a rolling deploy's old and new limits both
// run), and --clear makes a different --limit a usage error again. Bad input
// is a usage error that changes nothing.
func TestSemLimitCommand(t *testing.T) {
	t.Parallel()
	_, url, ns := server(t)
	run := func(want int, args ...string) string {
		t.Helper()
		out, errb, code := cli(t, url, append([]string{"--namespace", ns}, args...)...)
		if code != want {
			t.Fatalf("%v: exit %d, want %d; stdout %q, stderr %q", args, code, want, out, errb)
		}
		return out + errb
	}
	wantIn := func(got, want string) {
		t.Helper()
		if !strings.Contains(got, want) {
			t.Fatalf("output %q, want it to contain %q", got, want)
		}
	}
	wantIn(run(0, "sem-limit", "s"), `semaphore "s" has no stored limit`)
	wantIn(run(0, "sem-limit", "s", "0"), `semaphore "s" has no stored limit: nothing to clear`)
	for _, bad := range [][]string{{"sem-limit"}, {"sem-limit", "s", "-3"}, {"sem-limit", "s", "x"},
		{"sem-limit", "s", "2", "3"}, {"sem-limit", "--clear", "s", "2"}, {"sem-limit", "a\nb", "2"}} {
		run(exitUsage, bad...)
	}
	wantIn(run(0, "sem-limit", "s"), `semaphore "s" has no stored limit`)

	run(0, "sem", "--limit", "1", "s", "--", "true")
	wantIn(run(0, "sem-limit", "s"), `semaphore "s": limit 1, stored by its first user`)
	wantIn(run(exitUsage, "sem", "--limit", "2", "s", "--", "true"), "leasehold sem-limit s 2")

	wantIn(run(0, "sem-limit", "s", "2"), `semaphore "s": limit 1 -> 2`)
	wantIn(run(0, "sem-limit", "s"), `semaphore "s": limit 2, set by an operator`)
	for _, limit := range []string{"1", "2", "5"} { // old, new, and any other --limit run
		run(0, "sem", "--limit", limit, "--wait", "0", "s", "--", "true")
	}

	wantIn(run(0, "sem-limit", "--clear", "s"), `semaphore "s": limit 2 is no longer an operator's`)
	wantIn(run(0, "sem-limit", "s"), `semaphore "s": limit 2, stored by its first user`)
	run(exitUsage, "sem", "--limit", "1", "s", "--", "true")
	run(0, "sem", "--limit", "2", "--wait", "0", "s", "--", "true")
	wantIn(run(0, "sem-limit", "--clear", "never-used"), `semaphore "never-used" has no stored limit: nothing to clear`)
}

// TestElect: the leader's command runs alone; when it is stopped by a signal
// passed on by leasehold, the next candidate leads with a higher term.
func TestElect(t *testing.T) {
	t.Parallel()
	_, url, ns := server(t)
	dir := t.TempDir()
	env := []string{"DIR=" + dir}
	a := startEnv(t, env, url, "elect", "--namespace", ns, "--value", "a", "e", "--", "sh", "-c",
		`echo "$LEASEHOLD_TOKEN" > "$DIR/a"; trap 'exit 0' TERM; sleep 60 & wait`)
	ta := waitFile(t, filepath.Join(dir, "a"), 10*time.Second)
	b := startEnv(t, env, url, "elect", "--namespace", ns, "--value", "b", "e", "--", "sh", "-c", `echo "$LEASEHOLD_TOKEN" > "$DIR/b"; exit 3`)
	time.Sleep(200 * time.Millisecond)
	if b.exited() {
		t.Fatalf("second candidate ran while the first led: %s", b.stderr.String())
	}
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := a.wait(10 * time.Second); code != 0 {
		t.Fatalf("leader exit %d, want 0 (its command's); stderr %s", code, a.stderr.String())
	}
	if code := b.wait(10 * time.Second); code != 3 {
		t.Fatalf("second exit %d, want 3; stderr %s", code, b.stderr.String())
	}
	tb := waitFile(t, filepath.Join(dir, "b"), time.Second)
	na, _ := strconv.ParseInt(strings.TrimSpace(ta), 10, 64)
	nb, _ := strconv.ParseInt(strings.TrimSpace(tb), 10, 64)
	if na <= 0 || nb <= na {
		t.Fatalf("terms %d then %d, want increasing", na, nb)
	}
}

// TestDemo plays the demo in this process on the embedded Redis.
func TestDemo(t *testing.T) {
	t.Parallel()
	out := playDemo(t)
	for _, want := range []string{
		`node-a    leads "scheduler" (term 1)`,
		"node-a    is cut off from Redis",
		"node-a    stops leading: lease lost",
		`leads "scheduler" (term 2)`,
		"in use 2 of 2",
		"taken away (removed from the pool)",
		"all 4 holds kept, none lost",
		"unreachable for 2.5s",
		`leads "scheduler" (term 3)`,
		"holds lost ",
		"overlaps: 0 ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
}

// TestDemoRealRedis plays the demo on a real server with --redis.
func TestDemoRealRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Options{})
	out := playDemo(t, "--redis", "redis://"+srv.Addr())
	if !strings.Contains(out, "overlaps: 0 ") || !strings.Contains(out, "redis://"+srv.Addr()) {
		t.Errorf("demo on a real server:\n%s", out)
	}
	keys, err := srv.Client(t).Do(context.Background(), srv.Client(t).B().Keys().Pattern("*").Build()).AsStrSlice()
	if err != nil || len(keys) != 0 {
		t.Errorf("keys left behind: %v %v", keys, err)
	}
}

func playDemo(t *testing.T, args ...string) string {
	t.Helper()
	var out, errb strings.Builder
	var mu sync.Mutex
	begin := time.Now()
	code := run(context.Background(), append([]string{"demo"}, args...), &lockedWriter{&mu, &out}, &errb)
	d := time.Since(begin)
	t.Logf("demo took %v:\n%s", d.Round(time.Millisecond), out.String())
	if code != 0 {
		t.Fatalf("demo: exit %d: %s", code, errb.String())
	}
	if d > time.Minute {
		t.Errorf("demo took %v, more than a minute", d)
	}
	return out.String()
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *strings.Builder
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// TestResetElection: reset NAME of an election forces its leader out; the
// `elect` process signals its command and exits with the loss code.
func TestResetElection(t *testing.T) {
	t.Parallel()
	_, url, ns := server(t)
	dir := t.TempDir()
	env := []string{"DIR=" + dir}
	script := `trap 'echo term > "$DIR/term"; exit 143' TERM; echo ready > "$DIR/ready"; sleep 60 & wait`
	p := startEnv(t, env, url, "elect", "--namespace", ns, "--ttl", "5s", "e", "--", "sh", "-c", script)
	waitFile(t, filepath.Join(dir, "ready"), 10*time.Second)

	stdout, stderr, code := cli(t, url, "reset", "--namespace", ns, "e")
	if code != exitError || !strings.Contains(stdout, `would reset election "e": led by session`) {
		t.Fatalf("reset without --yes: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	stdout, stderr, code = cli(t, url, "reset", "--namespace", ns, "e", "--yes")
	if code != 0 || !strings.Contains(stdout, `reset election "e": forced session`) {
		t.Fatalf("reset --yes: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	waitFile(t, filepath.Join(dir, "term"), 5*time.Second)
	if code := p.wait(10 * time.Second); code != exitLost {
		t.Fatalf("elect exit %d, want %d; stderr %s", code, exitLost, p.stderr.String())
	}
}

// TestExitWithRedisStalled: with Redis paused, leasehold still exits within
// 250ms of its command: the release and the session's close wait no longer
// than cleanupTimeout (the lease expires on the server by itself). Not
// parallel: it measures a bound, and this package's parallel tests run
// dozens of processes on a small machine.
func TestExitWithRedisStalled(t *testing.T) {
	srv, url, ns := server(t)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "go")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	script := `echo > "$DIR/ready"; read line < "$DIR/go"; date +%s%N > "$DIR/exit"`
	p := startEnv(t, []string{"DIR=" + dir}, url, "lock", "--namespace", ns, "--ttl", "10s", "m", "--", "sh", "-c", script)
	waitFile(t, filepath.Join(dir, "ready"), 10*time.Second)
	srv.Stop()
	defer srv.Cont()
	if err := os.WriteFile(fifo, []byte("go\n"), 0o600); err != nil { // blocks until the command reads
		t.Fatal(err)
	}
	code := p.wait(10 * time.Second)
	exited := time.Now()
	if code != 0 {
		t.Fatalf("exit %d, want 0; stderr %s", code, p.stderr.String())
	}
	ns64, err := strconv.ParseInt(strings.TrimSpace(waitFile(t, filepath.Join(dir, "exit"), time.Second)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if d := exited.Sub(time.Unix(0, ns64)); d > 250*time.Millisecond {
		t.Fatalf("leasehold exited %v after its command, want at most 250ms; stderr %s", d, p.stderr.String())
	} else {
		t.Logf("leasehold exited %v after its command", d.Round(time.Millisecond))
	}
	if !strings.Contains(p.stderr.String(), "did not confirm the release") {
		t.Errorf("stderr %q does not say that the release was not confirmed", p.stderr.String())
	}
}

// TestResetAllKinds: reset --all takes mutexes, read-write mutexes,
// election leaders and semaphores (TestResetSemaphoreAndPool has pools).
func TestResetAllKinds(t *testing.T) {
	t.Parallel()
	_, url, ns := server(t)
	dir := t.TempDir()
	env := []string{"DIR=" + dir}
	hold := func(file string) string {
		return `trap 'exit 143' TERM; echo > "$DIR/` + file + `"; sleep 60 & wait`
	}
	holders := map[string]*proc{
		"m":  startEnv(t, env, url, "lock", "--namespace", ns, "m", "--", "sh", "-c", hold("m")),
		"rw": startEnv(t, env, url, "rlock", "--namespace", ns, "rw", "--", "sh", "-c", hold("rw")),
		"e":  startEnv(t, env, url, "elect", "--namespace", ns, "e", "--", "sh", "-c", hold("e")),
		"s":  startEnv(t, env, url, "sem", "--namespace", ns, "s", "--limit", "2", "--", "sh", "-c", hold("s")),
	}
	for _, f := range []string{"m", "rw", "e", "s"} {
		waitFile(t, filepath.Join(dir, f), 10*time.Second)
	}

	stdout, stderr, code := cli(t, url, "reset", "--all", "--namespace", ns)
	for _, want := range []string{`would reset mutex "m"`, `would reset rwmutex "rw"`, `would reset election "e"`, `would reset semaphore "s"`} {
		if !strings.Contains(stdout, want) {
			t.Errorf("reset --all without --yes: stdout %q lacks %q", stdout, want)
		}
	}
	if want := "add --yes to force-release 1 mutex, 1 read-write mutex, 1 election leader, 1 semaphore"; code != exitError || !strings.Contains(stderr, want) {
		t.Errorf("reset --all without --yes: exit %d, stderr %q, want %d and %q", code, stderr, exitError, want)
	}
	stdout, stderr, code = cli(t, url, "reset", "--all", "--yes", "--namespace", ns)
	for _, want := range []string{`reset mutex "m"`, `reset rwmutex "rw"`, `reset election "e"`, `reset semaphore "s"`} {
		if code != 0 || !strings.Contains(stdout, want) {
			t.Errorf("reset --all --yes: exit %d, stdout %q, stderr %q; want %q", code, stdout, stderr, want)
		}
	}
	for name, p := range holders {
		if code := p.wait(10 * time.Second); code != exitLost {
			t.Errorf("%s: exit %d, want %d; stderr %s", name, code, exitLost, p.stderr.String())
		}
	}
}

// TestLockWithoutCommand: 'lock NAME' holds the mutex until interrupted,
// printing the token, then releases it at once and exits 0.
func TestLockWithoutCommand(t *testing.T) {
	t.Parallel()
	_, url, ns := server(t)
	p := startEnv(t, nil, url, "lock", "--namespace", ns, "m")
	ctx := testutil.Ctx(t, 10*time.Second)
	for !strings.Contains(p.outw.String(), "holding") {
		if ctx.Err() != nil || p.exited() {
			t.Fatalf("no word of the hold: stdout %q, stderr %q", p.outw.String(), p.errw.String())
		}
		time.Sleep(5 * time.Millisecond) // polls the output, as waitFile polls a file
	}
	if _, stderr, code := cli(t, url, "lock", "--namespace", ns, "--wait", "0", "m", "--", "true"); code != exitNotAcquired {
		t.Fatalf("lock --wait 0 while held: exit %d, stderr %q", code, stderr)
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(10 * time.Second); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0; stderr %s", code, p.stderr.String())
	}
	if out := p.stdout.String(); !strings.HasPrefix(out, `holding mutex "m": token `) || !strings.Contains(out, "Ctrl-C") {
		t.Errorf("stdout %q does not give the token and how to release it", out)
	}
	if _, stderr, code := cli(t, url, "lock", "--namespace", ns, "--wait", "0", "m", "--", "true"); code != 0 {
		t.Errorf("lock --wait 0 after the release: exit %d, stderr %q", code, stderr)
	}
}
