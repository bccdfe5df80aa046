package flight_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/flight"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/session"
)

// The process tests run the test binary again as caller processes: TestMain
// sees helperEnv and runs helperMain with the helperConfig in it instead of
// the tests. A child reports events as JSON lines on stdout and takes
// commands as lines on stdin ("go": call Do; "finish": let a blocked fn
// return); stdin's end makes it exit.
const helperEnv = "LEASEHOLD_FLIGHT_HELPER"

type helperConfig struct {
	Index    int
	Addr, NS string
	TTL      time.Duration // session lease TTL, at most childGrace
	Group    string
	Key      string
	CacheTTL time.Duration // flight.Options.TTL
	Callers  int           // goroutines calling Do at once
	// Fn is what fn does after counting its run (INCR runs key): "quick"
	// returns; "await-queue" waits until Waiters callers are queued on the
	// key's mutex, then computes for Compute; "block" waits for "finish"
	// on stdin, ignoring its ctx (a computation that does not stop).
	Fn      string
	Waiters int64
	Compute time.Duration
}

// event is one line a child writes.
type event struct {
	Ev        string `json:"ev"` // ready, computing, result, done, note
	Val       string `json:"val,omitempty"`
	Err       string `json:"err,omitempty"`
	Discarded bool   `json:"discarded,omitempty"` // errors.Is(err, flight.ErrDiscarded)
	Lost      bool   `json:"lost,omitempty"`      // errors.Is(err, session.ErrLost)
	Reqs      int64  `json:"reqs,omitempty"`      // done: requests the session's client sent during the Do calls
	Note      string `json:"note,omitempty"`
	At        int64  `json:"at,omitempty"` // result, computed: wall clock, ns (one host: comparable across processes)
}

func runsKey(ns string) string        { return "{" + ns + "}:test:runs" }
func queueKey(ns, name string) string { return "{" + ns + "}:q:m:flight:" + name }

func helperMain(raw string) int {
	var cfg helperConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "helper config:", err)
		return 2
	}
	var mu sync.Mutex
	enc := json.NewEncoder(os.Stdout)
	emit := func(ev event) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(ev)
	}
	fail := func(what string, err error) int {
		fmt.Fprintln(os.Stderr, what+":", err)
		return 1
	}
	ctx := context.Background()
	base, err := rueidis.NewClient(testutil.ClientOption(cfg.Addr))
	if err != nil {
		return fail("client", err)
	}
	defer base.Close()
	probe, err := rueidis.NewClient(testutil.ClientOption(cfg.Addr)) // fn's own: not counted
	if err != nil {
		return fail("probe client", err)
	}
	defer probe.Close()
	cc := &testutil.CountingClient{Client: base}
	s, err := session.New(ctx, cc, session.Options{Namespace: cfg.NS, TTL: cfg.TTL, RestartGrace: childGrace})
	if err != nil {
		return fail("session", err)
	}
	defer s.Close()
	lines := make(chan string, 4)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	emit(event{Ev: "ready"})
	if l, ok := <-lines; !ok || l != "go" {
		return 0
	}
	g := flight.New(s, cfg.Group, flight.Options{TTL: cfg.CacheTTL})
	fn := func(ctx context.Context) ([]byte, error) {
		if err := probe.Do(ctx, probe.B().Incr().Key(runsKey(cfg.NS)).Build()).Error(); err != nil {
			return nil, err
		}
		emit(event{Ev: "computing"})
		switch cfg.Fn {
		case "await-queue":
			q := queueKey(cfg.NS, cfg.Group+":"+cfg.Key)
			deadline := time.Now().Add(10 * time.Second)
			for {
				n, err := probe.Do(ctx, probe.B().Llen().Key(q).Build()).AsInt64()
				if err == nil && n >= cfg.Waiters {
					break
				}
				if time.Now().After(deadline) {
					emit(event{Ev: "note", Note: fmt.Sprintf("only %d of %d callers queued after 10s (%v)", n, cfg.Waiters, err)})
					break
				}
				time.Sleep(2 * time.Millisecond) // observes Redis state that has no event
			}
			time.Sleep(cfg.Compute) // the computation itself
			emit(event{Ev: "computed", At: time.Now().UnixNano()})
		case "block":
			for l := range lines {
				if l == "finish" {
					break
				}
			}
		}
		return []byte("v-" + strconv.Itoa(cfg.Index)), nil
	}
	before := cc.N.Load()
	var wg sync.WaitGroup
	for range cfg.Callers {
		wg.Go(func() {
			v, err := g.Do(ctx, cfg.Key, fn)
			ev := event{Ev: "result", Val: string(v), At: time.Now().UnixNano()}
			if err != nil {
				ev.Err = err.Error()
				ev.Discarded = errors.Is(err, flight.ErrDiscarded)
				ev.Lost = errors.Is(err, session.ErrLost)
			}
			emit(ev)
		})
	}
	wg.Wait()
	emit(event{Ev: "done", Reqs: cc.N.Load() - before})
	return 0
}

// child is a caller process started by startChild.
type child struct {
	cfg    helperConfig
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	events chan event    // closed when its stdout ends
	exited chan struct{} // closed when it has exited
}

func startChild(t *testing.T, cfg helperConfig) *child {
	t.Helper()
	ch := testutil.StartChild(t, helperEnv, cfg, fmt.Sprintf("child%d.log", cfg.Index))
	cmd, stdin, stdout, logPath := ch.Cmd, ch.Stdin, ch.Stdout, ch.Log
	c := &child{cfg: cfg, cmd: cmd, stdin: stdin, events: make(chan event, 64), exited: make(chan struct{})}
	read := make(chan struct{})
	go func() {
		defer close(read)
		defer close(c.events)
		dec := json.NewDecoder(stdout)
		for {
			var ev event
			if err := dec.Decode(&ev); err != nil {
				return // its end, or a line cut short by a kill
			}
			c.events <- ev
		}
	}()
	go func() {
		<-read
		_ = cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = stdin.Close()
		select {
		case <-c.exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-c.exited
		}
		if t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil && len(b) > 0 {
				t.Logf("child %d stderr:\n%s", cfg.Index, b)
			}
		}
	})
	return c
}

func (c *child) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(c.stdin, line+"\n"); err != nil {
		t.Fatalf("child %d: %v", c.cfg.Index, err)
	}
}

// next returns the child's next event of type ev; other events go to other
// (if not nil). It fails the test when ctx ends or the child exits first.
func (c *child) next(t *testing.T, ctx context.Context, ev string, other func(event)) event {
	t.Helper()
	for {
		select {
		case e, ok := <-c.events:
			if !ok {
				t.Fatalf("child %d exited before %q", c.cfg.Index, ev)
			}
			if e.Ev == "note" {
				t.Errorf("child %d: %s", c.cfg.Index, e.Note)
				continue
			}
			if e.Ev == ev {
				return e
			}
			if other == nil {
				t.Fatalf("child %d: event %+v before %q", c.cfg.Index, e, ev)
			}
			other(e)
		case <-ctx.Done():
			t.Fatalf("child %d: no %q event: %v", c.cfg.Index, ev, context.Cause(ctx))
		}
	}
}
