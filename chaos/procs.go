package chaos

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/redistest"
)

// Proc is one holder process: the test binary re-executed with
// -test.run=^TestHelperProcess$ and its WorkerConfig in the environment. Its
// events arrive on a pipe (its file descriptor 3); its stdout and stderr go
// to a log file. Its methods are safe for concurrent use.
type Proc struct {
	Index int
	Proxy *redistest.Proxy // the fault proxy between it and Redis, if any
	Log   string           // path of its stdout+stderr

	cmd    *exec.Cmd
	stdin  io.WriteCloser
	hist   *History
	read   chan struct{} // closed when its event pipe is drained
	exited chan struct{} // closed when it has exited

	mu     sync.Mutex
	paused bool
}

// startProc starts a holder process running cfg.
func startProc(t testing.TB, hist *History, cfg WorkerConfig, dir string, proxy *redistest.Proxy) *Proc {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatalf("chaos: %v", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatalf("chaos: pipe: %v", err)
	}
	logPath := filepath.Join(dir, fmt.Sprintf("proc%d.log", cfg.Proc))
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatalf("chaos: %v", err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+string(raw))
	cmd.ExtraFiles = []*os.File{w}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatalf("chaos: %v", err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("chaos: start holder process: %v", err)
	}
	w.Close()
	logf.Close()
	p := &Proc{Index: cfg.Proc, Proxy: proxy, Log: logPath, cmd: cmd, stdin: stdin, hist: hist,
		read: make(chan struct{}), exited: make(chan struct{})}
	go func() {
		defer close(p.read)
		defer r.Close()
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			var ev Event
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				continue // a line cut short by a killed process
			}
			ev.Proc = p.Index
			hist.Add(ev)
		}
	}()
	go func() {
		err := cmd.Wait()
		hist.Add(Event{Type: EvExit, T: Mono(), Proc: p.Index, Detail: fmt.Sprint(err)})
		close(p.exited)
	}()
	t.Cleanup(func() { p.stop(0) })
	return p
}

// Pause stops the process with SIGSTOP, like a long GC or VM pause.
func (p *Proc) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused {
		return
	}
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err == nil {
		p.paused = true
		p.hist.Add(Event{Type: EvPause, T: Mono(), Proc: p.Index})
	}
}

// Resume continues a paused process with SIGCONT.
func (p *Proc) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.paused {
		return
	}
	t := Mono()
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err == nil {
		p.paused = false
		p.hist.Add(Event{Type: EvResume, T: t, Proc: p.Index})
	}
}

// stop resumes the process, closes its stdin (it then releases what it holds,
// closes its session and exits) and waits for it, killing it after grace.
func (p *Proc) stop(grace time.Duration) {
	p.Resume()
	_ = p.stdin.Close()
	if grace > 0 {
		select {
		case <-p.exited:
		case <-time.After(grace):
			p.hist.Note(EvNote, fmt.Sprintf("holder process %d did not exit within %v: killed", p.Index, grace))
		}
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
	<-p.read
}
