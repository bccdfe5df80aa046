//go:build unix

package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/leasehold/leasehold/internal/redistest"
)

// binDir holds the leasehold binary built for the end-to-end tests.
var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	if code == 0 {
		if err := goleak.Find(redistest.LeakOptions...); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// binary builds the leasehold command once per test run and returns its path.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "leasehold-bin-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "leasehold")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// proc is a leasehold process started by a test.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdout bytes.Buffer
	stderr bytes.Buffer
	outw   *syncWriter // writes stdout; its String may be read while the process runs
	errw   *syncWriter // writes stderr; its String may be read while the process runs
	done   chan struct{}
}

// cli runs leasehold with args against redis (a URL; "" leaves
// LEASEHOLD_REDIS unset) and returns when it exits.
func cli(t *testing.T, redis string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	p := startEnv(t, nil, redis, args...)
	code = p.wait(30 * time.Second)
	return p.stdout.String(), p.stderr.String(), code
}

// startEnv starts leasehold in the background with extra environment
// variables ("K=V"); t.Cleanup stops it (SIGTERM, which it passes on to its
// command, then SIGKILL).
func startEnv(t *testing.T, env []string, redis string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, cmd: exec.Command(binary(t), args...), done: make(chan struct{})}
	p.cmd.Env = append(append(os.Environ(), "LEASEHOLD_REDIS="+redis), env...)
	p.outw, p.errw = &syncWriter{w: &p.stdout}, &syncWriter{w: &p.stderr}
	p.cmd.Stdout, p.cmd.Stderr = p.outw, p.errw
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
			return
		default:
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait(d time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		<-p.done
		p.t.Fatalf("leasehold %v did not exit within %v; stderr: %s", p.cmd.Args[1:], d, p.stderr.String())
	}
	return p.cmd.ProcessState.ExitCode()
}

// exited reports whether the process has exited.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

// String returns what was written so far.
func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.String()
}

// waitFile waits until path exists and is not empty, and returns its content.
func waitFile(t *testing.T, path string, d time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		b, err := os.ReadFile(path)
		if err == nil && len(b) > 0 && bytes.HasSuffix(b, []byte("\n")) {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not written within %v", path, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
