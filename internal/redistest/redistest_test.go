package redistest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, LeakOptions...)
}

func mustString(t *testing.T, r rueidis.RedisResult) string {
	t.Helper()
	v, err := r.ToString()
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
	return v
}

func TestClientSetGet(t *testing.T) {
	t.Parallel()
	s := Start(t, Options{})
	c := s.Client(t)
	ctx := context.Background()
	if err := c.Do(ctx, c.B().Set().Key("k").Value("v").Build()).Error(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if got := mustString(t, c.Do(ctx, c.B().Get().Key("k").Build())); got != "v" {
		t.Fatalf("GET = %q, want v", got)
	}
	if got := mustString(t, s.Do(t, "GET", "k")); got != "v" {
		t.Fatalf("Do GET = %q, want v", got)
	}
}

func TestStopCont(t *testing.T) {
	t.Parallel()
	s := Start(t, Options{})
	c := s.Client(t)
	s.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := c.Do(ctx, c.B().Ping().Build()).Error(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("PING on stopped server: err = %v, want deadline exceeded", err)
	}
	s.Cont()
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	if got := mustString(t, c.Do(ctx2, c.B().Ping().Build())); got != "PONG" {
		t.Fatalf("PING after Cont = %q", got)
	}
}

func TestKillRestartWithoutAOFIsEmpty(t *testing.T) {
	t.Parallel()
	s := Start(t, Options{})
	addr := s.Addr()
	if err := s.Do(t, "SET", "k", "v").Error(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	s.Kill()
	s.Kill() // idempotent
	if err := s.Do(t, "PING").Error(); err == nil {
		t.Fatal("PING succeeded on a killed server")
	}
	s.Restart()
	if s.Addr() != addr {
		t.Fatalf("Addr after Restart = %s, want %s", s.Addr(), addr)
	}
	if err := s.Do(t, "GET", "k").Error(); !rueidis.IsRedisNil(err) {
		t.Fatalf("GET after Restart: err = %v, want nil reply", err)
	}
}

func TestKillRestartWithAOFKeepsData(t *testing.T) {
	t.Parallel()
	s := Start(t, Options{AOF: true})
	c := s.Client(t)
	if err := c.Do(context.Background(), c.B().Set().Key("k").Value("v").Build()).Error(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	s.Kill()
	s.Restart()
	if got := mustString(t, s.Do(t, "GET", "k")); got != "v" {
		t.Fatalf("GET after Restart = %q, want v", got)
	}
	s.Restart() // also works while running
	if got := mustString(t, s.Do(t, "GET", "k")); got != "v" {
		t.Fatalf("GET after second Restart = %q, want v", got)
	}
}

func TestStartsGetDifferentPorts(t *testing.T) {
	t.Parallel()
	a, b := Start(t, Options{}), Start(t, Options{})
	if a.Addr() == b.Addr() {
		t.Fatalf("both servers on %s", a.Addr())
	}
}

func TestExtraArgs(t *testing.T) {
	t.Parallel()
	s := Start(t, Options{Args: []string{"--maxmemory", "10mb"}})
	v, err := s.Do(t, "CONFIG", "GET", "maxmemory").AsStrMap()
	if err != nil || v["maxmemory"] != "10485760" {
		t.Fatalf("CONFIG GET maxmemory = %v, %v", v, err)
	}
}

func TestCleanupKillsStoppedServer(t *testing.T) {
	t.Parallel()
	var s *Server
	t.Run("stopped", func(t *testing.T) {
		s = Start(t, Options{})
		s.Stop()
	})
	if err := s.Do(t, "PING").Error(); err == nil {
		t.Fatal("server still answers after its test's cleanup")
	}
}

func TestConcurrentFaults(t *testing.T) {
	t.Parallel()
	s := Start(t, Options{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.Stop()
			s.Cont()
			_ = s.Addr()
			s.Kill()
		}()
	}
	wg.Wait()
	s.Restart()
	if got := mustString(t, s.Do(t, "PING")); got != "PONG" {
		t.Fatalf("PING = %q", got)
	}
}

// fatalTB records Fatalf instead of failing the real test.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestStartFailureReportsOutput(t *testing.T) {
	t.Parallel()
	f := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Start(f, Options{Args: []string{"--no-such-directive", "x"}})
	}()
	<-done
	if !strings.Contains(f.msg, "exited") || !strings.Contains(f.msg, "Bad directive") {
		t.Fatalf("Start failure message = %q", f.msg)
	}
}

func TestAddrAndExternal(t *testing.T) {
	t.Setenv("REDIS_ADDR", "redis.example:6379")
	if !External() || Addr(t) != "redis.example:6379" {
		t.Fatalf("External() = %v, Addr = %q", External(), Addr(t))
	}
	t.Setenv("REDIS_ADDR", "")
	if External() {
		t.Fatal("External() with empty REDIS_ADDR")
	}
	if addr := Addr(t); !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("Addr = %q", addr)
	}
}

func TestNamespace(t *testing.T) {
	t.Parallel()
	a, b := Namespace(t), Namespace(t)
	if a == b || !strings.HasPrefix(a, "t-TestNamespace-") {
		t.Fatalf("namespaces %q, %q", a, b)
	}
	t.Run("sub/{tag} "+strings.Repeat("x", 100), func(t *testing.T) {
		ns := Namespace(t)
		if len(ns) > 64 || strings.ContainsAny(ns, "{}/ ") || !strings.HasPrefix(ns, "t-TestNamespace_sub__tag__x") {
			t.Fatalf("Namespace = %q (%d chars)", ns, len(ns))
		}
	})
}

// TestTLS: a server started with Options.TLS answers over TLS only, and
// with RequireClientCert only clients that present the client certificate.
func TestTLS(t *testing.T) {
	t.Parallel()
	for _, require := range []bool{false, true} {
		t.Run(fmt.Sprintf("RequireClientCert=%v", require), func(t *testing.T) {
			t.Parallel()
			x := NewTLS(t, require)
			s := Start(t, Options{TLS: x})
			if got := mustString(t, s.Do(t, "PING")); got != "PONG" {
				t.Fatalf("PING over TLS = %q", got)
			}
			if ping(s.Addr(), nil) {
				t.Errorf("the server answered PING without TLS")
			}
			if got := ping(s.Addr(), x.Config(false)); got == require {
				t.Errorf("PING over TLS without a client certificate answered: %v, want %v", got, !require)
			}
			s.Restart()
			if got := mustString(t, s.Do(t, "PING")); got != "PONG" {
				t.Fatalf("PING over TLS after Restart = %q", got)
			}
		})
	}
}
