// Package redistest is a test harness that runs real redis-server processes
// for the tests of other packages and lets those tests fault them.
//
// Start launches redis-server (found on PATH) on a free 127.0.0.1 port with a
// data directory in t.TempDir(), waits until it answers PING and registers a
// t.Cleanup that kills it and waits for it to exit. Without Options.AOF the
// server persists nothing, so a restarted server comes back empty; with AOF
// every write is fsynced (appendfsync always) and survives Kill + Restart.
//
// Faults: Kill (SIGKILL), Stop/Cont (SIGSTOP/SIGCONT: the server hangs but
// keeps its connections) and Restart (same port, same directory). On Linux the
// server also gets SIGKILL when the test binary dies (Pdeathsig). No goroutine
// is left once the cleanups have run, so callers may use goleak.
//
// StartCluster runs a Redis Cluster (3 masters + 3 replicas by default) of
// such servers with --cluster-enabled, created by `redis-cli --cluster
// create`, and returns once it is healthy: cluster_state:ok everywhere, all
// nodes agree on slot owners and roles, every replica has finished its first
// sync (a replica that has not refuses to take over). Each node keeps its
// nodes-<port>.conf in its directory, so Restart brings it back with its node
// id; without AOF it comes back without data. Cluster faults, one line each:
//
//	c.Failover(t, c.ReplicaOf(t, m))  // manual CLUSTER FAILOVER; ~0.1 s, loses nothing
//	c.KillMaster(t, m)                // SIGKILL m, wait until its replica serves its slots
//	                                  // (= m.Kill(); c.WaitFailover(t, m)); NodeTimeout + ~2 s
//	c.RestartEmpty(t, m)              // SIGKILL m and restart it at once: back inside
//	                                  // cluster-node-timeout it is NOT failed over and serves
//	                                  // the same slots, empty (its replicas resync to empty);
//	                                  // it answers CLUSTERDOWN for its first ~2 s
//	                                  // (= m.Kill(); m.Restart(); c.WaitHealthy(t))
//	c.MigrateSlot(t, slot, to, pause) // reshard one slot key by key while clients write
//	m.Stop(); ...; m.Cont()           // a hang; longer than NodeTimeout fails it over
//
// Cluster.Client is a cluster-mode rueidis client (it follows MOVED and
// ASK); Cluster.Do and Server.Do talk to one node and follow nothing. Slot is
// the hash slot of a key. The cluster waits poll with a bound and fail the
// test with the last reason the cluster was not ready.
//
// When REDIS_ADDR is set, Addr returns it instead of starting a server; such
// tests share one Redis and must keep their keys under Namespace(t).
// Import this package from _test.go files only.
package redistest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"go.uber.org/goleak"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

const (
	readyTimeout = 10 * time.Second     // bound for a start to answer PING
	pollEvery    = 5 * time.Millisecond // readiness poll interval
	bindRetries  = 5                    // first Start: new ports to try on a bind race
	rebindFor    = 5 * time.Second      // Restart: how long to retry a busy port
)

// Options configures a server started by Start.
type Options struct {
	AOF  bool     // appendonly yes, appendfsync always, data dir in t.TempDir()
	Args []string // extra redis-server arguments, e.g. "--maxmemory", "10mb"
	TLS  *TLS     // serve TLS only (see NewTLS); Client, Do and the readiness PING use it
}

// Server is one redis-server process started by a test.
// Its methods are safe for concurrent use.
type Server struct {
	t    testing.TB
	opts Options
	dir  string
	port int

	portArgs func(port int) []string // extra arguments that depend on the port, or nil

	mu      sync.Mutex
	cmd     *exec.Cmd     // nil when not running
	done    chan struct{} // closed once cmd has been reaped
	stopped bool
}

// errAddrInUse reports that redis-server could not bind its port.
var errAddrInUse = errors.New("address already in use")

// Start starts redis-server on a free 127.0.0.1 port and waits until it
// answers PING. The server is killed in t.Cleanup, also if it is stopped.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redistest: redis-server not found on PATH (%v); run `make test` (which installs it) or `apt-get install redis-server`", err)
	}
	return start(t, o, FreePort, nil)
}

// start is Start with a port picker and per-port arguments (portArgs may be
// nil), which Restart reuses; StartCluster needs both.
func start(t testing.TB, o Options, pick func() (int, error), portArgs func(port int) []string) *Server {
	t.Helper()
	s := &Server{t: t, opts: o, dir: t.TempDir(), portArgs: portArgs}
	t.Cleanup(s.Kill)
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	for range bindRetries {
		if s.port, err = pick(); err != nil {
			t.Fatalf("redistest: find a free port: %v", err)
		}
		if err = s.launch(); !errors.Is(err, errAddrInUse) {
			break
		}
	}
	if err != nil {
		t.Fatalf("redistest: start redis-server: %v", err)
	}
	return s
}

// Addr returns the server address, "127.0.0.1:port".
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Kill sends SIGKILL and waits until the process has exited. It is a no-op
// if the server is not running.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kill()
}

// Stop pauses the process with SIGSTOP.
func (s *Server) Stop() { s.signal(sigStop, true) }

// Cont resumes a stopped process with SIGCONT.
func (s *Server) Cont() { s.signal(sigCont, false) }

// Restart kills the server if it is running and starts it again on the same
// port with the same directory and options, then waits for PING. AOF data
// survives; without AOF the server comes back empty. It fails the test that
// started the server, so call it from that test's goroutine.
func (s *Server) Restart() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kill()
	deadline := time.Now().Add(rebindFor)
	for {
		err := s.launch()
		if err == nil {
			return
		}
		if !errors.Is(err, errAddrInUse) || time.Now().After(deadline) {
			s.t.Fatalf("redistest: restart redis-server on %s: %v", s.Addr(), err)
		}
		time.Sleep(50 * time.Millisecond) // port still held by someone else
	}
}

// Client returns a new rueidis client connected to the server, closed in
// t.Cleanup.
func (s *Server) Client(t testing.TB) rueidis.Client {
	t.Helper()
	c, err := newClient(s.Addr(), s.tlsConfig())
	if err != nil {
		t.Fatalf("redistest: connect to %s: %v", s.Addr(), err)
	}
	t.Cleanup(c.Close)
	return c
}

// Do runs one command through a short-lived client and returns its result;
// connection errors are returned in the result, not reported to t.
func (s *Server) Do(t testing.TB, args ...string) rueidis.RedisResult {
	t.Helper()
	if len(args) == 0 {
		t.Fatalf("redistest: Do needs a command")
	}
	c, err := newClient(s.Addr(), s.tlsConfig())
	if err != nil {
		return rueidis.NewErrorResult(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	return c.Do(ctx, c.B().Arbitrary(args...).Build())
}

// Addr returns REDIS_ADDR when it is set (tests then share an external Redis
// and must use Namespace), otherwise the address of a new server.
func Addr(t testing.TB) string {
	t.Helper()
	if a := os.Getenv("REDIS_ADDR"); a != "" {
		return a
	}
	return Start(t, Options{}).Addr()
}

// External reports whether REDIS_ADDR is set.
func External() bool { return os.Getenv("REDIS_ADDR") != "" }

// Namespace returns a namespace unique to this test: "t-" + sanitized
// t.Name() + "-" + random suffix, at most 64 characters and without '{' or '}'.
func Namespace(t testing.TB) string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // never fails
	name := []byte(t.Name())
	for i, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			name[i] = '_'
		}
	}
	if limit := 64 - len("t--") - 2*len(b); len(name) > limit {
		name = name[:limit]
	}
	return "t-" + string(name) + "-" + hex.EncodeToString(b[:])
}

// newClient connects to a standalone server. ForceSingleClient skips
// rueidis' cluster probe, whose connections keep a close hook that starts a
// delayed topology-refresh goroutine when the server dies (seen by goleak).
func newClient(addr string, tc *tls.Config) (rueidis.Client, error) {
	return rueidis.NewClient(rueidis.ClientOption{
		InitAddress:       []string{addr},
		TLSConfig:         tc,
		DisableCache:      true,
		ConnWriteTimeout:  2 * time.Second,
		ForceSingleClient: true,
	})
}

// FreePort returns a loopback TCP port that was free a moment ago (other
// harnesses, such as internal/pgtest, start their servers on one too).
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// launch starts the process on s.port and waits for PING. On failure the
// process is gone; errAddrInUse is wrapped if it could not bind. s.mu held.
func (s *Server) launch() error {
	logfile := filepath.Join(s.dir, "redis.log")
	logStart := int64(0)
	if fi, err := os.Stat(logfile); err == nil {
		logStart = fi.Size() // only this launch's log lines matter
	}
	aof := "no"
	args := []string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--protected-mode", "no",
		"--save", "", "--dir", s.dir, "--logfile", logfile, "--daemonize", "no"}
	if s.opts.AOF {
		aof = "yes"
		args = append(args, "--appendfsync", "always")
	}
	args = append(append(args, "--appendonly", aof), s.opts.Args...)
	if s.opts.TLS != nil {
		args = append(args, s.opts.TLS.args(s.port)...)
	}
	if s.portArgs != nil {
		args = append(args, s.portArgs(s.port)...)
	}

	cmd := exec.Command("redis-server", args...)
	out := new(bytes.Buffer)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }() // reaper, exits with the process
	s.cmd, s.done, s.stopped = cmd, done, false

	deadline := time.Now().Add(readyTimeout)
	for !ping(s.Addr(), s.tlsConfig()) {
		select {
		case <-done:
			s.cmd = nil
			log := tail(logfile, logStart)
			msg := fmt.Errorf("redis-server exited (%v) before answering PING\n%s\nlog tail:\n%s",
				cmd.ProcessState, strings.TrimSpace(out.String()), log)
			if strings.Contains(log, "Address already in use") {
				return fmt.Errorf("%w: %w", errAddrInUse, msg)
			}
			return msg
		case <-time.After(pollEvery):
		}
		if time.Now().After(deadline) {
			s.kill()
			return fmt.Errorf("redis-server did not answer PING within %v\nlog tail:\n%s", readyTimeout, tail(logfile, logStart))
		}
	}
	return nil
}

// kill sends SIGKILL and waits for the reaper. s.mu held.
func (s *Server) kill() {
	if s.cmd == nil {
		return
	}
	if s.stopped {
		_ = s.cmd.Process.Signal(sigCont)
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd, s.stopped = nil, false
}

// live reports whether the process is running and not stopped.
func (s *Server) live() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil && !s.stopped
}

func (s *Server) signal(sig syscall.Signal, stopped bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	if err := s.cmd.Process.Signal(sig); err == nil {
		s.stopped = stopped
	}
}

// tlsConfig is the client configuration for a TLS server, or nil.
func (s *Server) tlsConfig() *tls.Config {
	if s.opts.TLS == nil {
		return nil
	}
	return s.opts.TLS.Config(true)
}

// ping dials addr, over TLS when tc is not nil, and reports whether it
// answers PING with +PONG.
func ping(addr string, tc *tls.Config) bool {
	d := &net.Dialer{Timeout: 100 * time.Millisecond}
	var c net.Conn
	var err error
	if tc != nil {
		c, err = tls.DialWithDialer(d, "tcp", addr, tc)
	} else {
		c, err = d.Dial("tcp", addr)
	}
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && line == "+PONG\r\n"
}

// tail returns the last lines of the log written since offset from.
func tail(path string, from int64) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	if from <= int64(len(b)) {
		b = b[from:]
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}

// LeakOptions are the goleak options every test package uses: they ignore the
// goroutines rueidis leaves sleeping for a while after a client is closed.
var LeakOptions = []goleak.Option{
	goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient)._refresh.func2"),
	goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient).redirectOrNew.func1"),
	goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*standalone).redirectToPrimary.func1"),
	goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1"), // cluster client: lazy topology refresh after MOVED or a lost conn, random delay
}
