package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/rueidis"
)

// server is a redis-server process the bench starts on a free loopback port,
// with no persistence. It dies with the bench process (Pdeathsig on Linux).
type server struct {
	port  int
	dir   string
	extra []string // more redis-server arguments (a cluster node's)

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	stopped bool
}

// startServer launches redis-server on a free 127.0.0.1 port and waits until
// it answers PING.
func startServer() (*server, error) { return startNode(freePort, nil) }

// startNode launches redis-server with the extra arguments on a port that
// pick returns and waits until it answers PING.
func startNode(pick func() (int, error), extra []string) (*server, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, fmt.Errorf("redis-server not found on PATH: %w (make redis-server installs it)", err)
	}
	dir, err := os.MkdirTemp("", "leasehold-bench-")
	if err != nil {
		return nil, err
	}
	var lastErr error
	for range 5 { // a port taken between freePort and bind: try another
		port, err := pick()
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		s := &server{port: port, dir: dir, extra: extra}
		if lastErr = s.launch(); lastErr == nil {
			return s, nil
		}
	}
	os.RemoveAll(dir)
	return nil, fmt.Errorf("start redis-server: %w", lastErr)
}

func (s *server) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

func (s *server) launch() error {
	args := []string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--protected-mode", "no",
		"--save", "", "--appendonly", "no", "--dir", s.dir,
		"--logfile", filepath.Join(s.dir, "redis.log"), "--daemonize", "no"}
	cmd := exec.Command("redis-server", append(args, s.extra...)...)
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }() // reaper: ends with the process
	s.cmd, s.done = cmd, done
	deadline := time.Now().Add(10 * time.Second)
	for !ping(s.addr()) {
		select {
		case <-done:
			b, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
			return fmt.Errorf("redis-server exited before answering PING: %s", tailLines(string(b), 5))
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.kill()
			return errors.New("redis-server did not answer PING within 10s")
		}
	}
	return nil
}

// kill stops the server for good and removes its directory.
func (s *server) kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	if s.stopped {
		_ = s.cmd.Process.Signal(syscall.SIGCONT)
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
	os.RemoveAll(s.dir)
}

// stop pauses the server with SIGSTOP; cont resumes it.
func (s *server) stop() error { return s.signal(syscall.SIGSTOP, true) }
func (s *server) cont() error { return s.signal(syscall.SIGCONT, false) }

func (s *server) signal(sig syscall.Signal, stopped bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return errors.New("redis-server is not running")
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		return err
	}
	s.stopped = stopped
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func ping(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
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

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// callTimeout bounds every Redis call the harness makes itself.
const callTimeout = 5 * time.Second

// admin is the harness's own client to a server: INFO snapshots, FLUSHALL,
// PEXPIRETIME. Every call has a deadline.
type admin struct{ c rueidis.Client }

func newAdmin(addr string) (*admin, error) {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true,
		ForceSingleClient: true, ConnWriteTimeout: 2 * time.Second})
	if err != nil {
		return nil, err
	}
	return &admin{c: c}, nil
}

func (a *admin) close() { a.c.Close() }

func (a *admin) do(ctx context.Context, args ...string) rueidis.RedisResult {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return a.c.Do(ctx, a.c.B().Arbitrary(args...).Build())
}

func (a *admin) flush(ctx context.Context) error { return a.do(ctx, "FLUSHALL").Error() }

// srvStats is one snapshot of INFO cpu + stats + commandstats + clients.
type srvStats struct {
	at      time.Time
	cpu     float64          // used_cpu_sys + used_cpu_user, seconds
	reads   int64            // total_reads_processed: socket reads, so client writes as batched
	clients int64            // connected_clients, the admin's own included
	calls   map[string]int64 // per command, e.g. "evalsha"
	usec    map[string]int64
}

func (a *admin) stats(ctx context.Context) (srvStats, error) {
	s, err := a.do(ctx, "INFO", "cpu", "stats", "commandstats", "clients").ToString()
	if err != nil {
		return srvStats{}, fmt.Errorf("INFO: %w", err)
	}
	st := srvStats{at: time.Now(), calls: map[string]int64{}, usec: map[string]int64{}}
	for line := range strings.Lines(s) {
		line = strings.TrimSpace(line)
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch {
		case k == "used_cpu_sys" || k == "used_cpu_user":
			f, _ := strconv.ParseFloat(v, 64)
			st.cpu += f
		case k == "total_reads_processed":
			st.reads, _ = strconv.ParseInt(v, 10, 64)
		case k == "connected_clients":
			st.clients, _ = strconv.ParseInt(v, 10, 64)
		case strings.HasPrefix(k, "cmdstat_"):
			name := strings.TrimPrefix(k, "cmdstat_")
			for kv := range strings.SplitSeq(v, ",") {
				f, val, _ := strings.Cut(kv, "=")
				n, _ := strconv.ParseInt(val, 10, 64)
				switch f {
				case "calls":
					st.calls[name] = n
				case "usec":
					st.usec[name] = n
				}
			}
		}
	}
	return st, nil
}

// srvDelta is the server-side work between two snapshots.
type srvDelta struct {
	cpu      float64 // seconds
	reads    int64   // socket reads (the admin's INFO adds one)
	commands int64   // every command executed, those inside scripts included; INFO and PING excluded
	calls    map[string]int64
	usec     map[string]int64
}

func (b srvStats) sub(a srvStats) srvDelta {
	d := srvDelta{cpu: b.cpu - a.cpu, reads: b.reads - a.reads, calls: map[string]int64{}, usec: map[string]int64{}}
	for k, v := range b.calls {
		d.calls[k] = v - a.calls[k]
		// INFO is the admin's snapshot; PING, rueidis keeping an idle
		// connection alive (a leasehold session's shared connection idles
		// while its calls go over its own): neither is a contender's work.
		if k != "info" && k != "ping" {
			d.commands += v - a.calls[k]
		}
	}
	for k, v := range b.usec {
		d.usec[k] = v - a.usec[k]
	}
	return d
}

// pexpiretime returns the absolute expiry (Unix ms, server clock) of key, or
// a negative value as PEXPIRETIME does (-2 missing, -1 no TTL).
func (a *admin) pexpiretime(ctx context.Context, key string) (int64, error) {
	return a.do(ctx, "PEXPIRETIME", key).AsInt64()
}

func (a *admin) version(ctx context.Context) string {
	s, err := a.do(ctx, "INFO", "server").ToString()
	if err != nil {
		return "?"
	}
	for line := range strings.Lines(s) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v
		}
	}
	return "?"
}

// pid is the server's process id, 0 when it is not running (killed, or
// exited and reaped: its pid may be another process's by now).
func (s *server) pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	select {
	case <-s.done:
		return 0
	default:
		return s.cmd.Process.Pid
	}
}
