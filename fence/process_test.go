//go:build unix

package fence_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/mutex"
	"github.com/leasehold/leasehold/session"
)

// helperEnv carries a holder process's helperConfig, as JSON.
const helperEnv = "LEASEHOLD_FENCE_HELPER"

// helperConfig is what one holder process does: Increments committed
// guarded increments of the counter, each under the mutex "counter".
type helperConfig struct {
	Redis, Namespace, DSN string
	TTL                   time.Duration
	Increments            int
	// PauseBefore / PauseAfter: at this attempt (0: never), after Lock and
	// before BEGIN / after Guard and the read, say so on stdout and wait for
	// a line on stdin (the test stops the process in between).
	PauseBefore, PauseAfter int
}

// helperMain runs the holder process body when this binary was started as
// one, and reports whether it was.
func helperMain() bool {
	raw := os.Getenv(helperEnv)
	if raw == "" {
		return false
	}
	var cfg helperConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "fence helper: bad config:", err)
		os.Exit(2)
	}
	if err := runHelper(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "fence helper:", err)
		os.Exit(1)
	}
	os.Exit(0)
	return true
}

// runHelper loops lock → BEGIN → Guard → read → UPDATE → COMMIT → release,
// printing "locked T", "pause-before T", "pause-after T", "stale T" and
// "commit T" (T: the hold's token) and finally "done N".
func runHelper(cfg helperConfig) error {
	ctx := context.Background()
	c, err := rueidis.NewClient(testutil.ClientOption(cfg.Redis))
	if err != nil {
		return err
	}
	defer c.Close()
	// A stopped holder loses its session: the manager opens another.
	mgr := session.NewManager(c, session.Options{Namespace: cfg.Namespace, TTL: cfg.TTL})
	defer mgr.Close()
	db, err := sql.Open("pgx", cfg.DSN)
	if err != nil {
		return err
	}
	defer db.Close()
	in := bufio.NewReader(os.Stdin)
	wait := func(what string, tok int64) error {
		fmt.Printf("%s %d\n", what, tok)
		_, err := in.ReadString('\n')
		return err
	}
	done := 0
	for attempt := 1; done < cfg.Increments; attempt++ {
		lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		s, err := mgr.Session(lctx)
		var h *session.Hold
		if err == nil {
			h, err = mutex.New(s, "counter").Lock(lctx)
		}
		cancel()
		if errors.Is(err, session.ErrLost) {
			continue // lost while waiting (the machine stalled): again, with a new session
		}
		if err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		tok := h.Token()
		fmt.Printf("locked %d\n", tok)
		if attempt == cfg.PauseBefore {
			if err := wait("pause-before", tok); err != nil {
				return err
			}
		}
		// From here on the hold's context is not looked at: the process
		// acts as one paused after its last check would.
		ok, err := increment(ctx, db, tok, func() error {
			if attempt == cfg.PauseAfter {
				return wait("pause-after", tok)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if ok {
			done++
			fmt.Printf("commit %d\n", tok)
		} else {
			fmt.Printf("stale %d\n", tok)
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_ = h.Release(rctx) // ErrLost after a pause: nothing to do
		cancel()
	}
	fmt.Printf("done %d\n", done)
	return nil
}

// increment runs one guarded read-modify-write of the counter with token
// and records it in commits; mid runs between the read and the write. It
// reports false when Guard refused the token.
func increment(ctx context.Context, db *sql.DB, token int64, mid func() error) (bool, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	if err := fence.Guard(ctx, tx, "counter", token); errors.Is(err, fence.ErrStale) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	var n int64
	if err := tx.QueryRowContext(ctx, "SELECT n FROM counter").Scan(&n); err != nil {
		return false, err
	}
	if err := mid(); err != nil {
		return false, err
	}
	if _, err := tx.ExecContext(ctx, "UPDATE counter SET n = $1", n+1); err != nil {
		return false, err
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO commits (token) VALUES ($1)", token); err != nil {
		return false, err
	}
	return true, tx.Commit()
}

// holder is a holder process as the test sees it.
type holder struct {
	idx   int
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

type line struct {
	proc int
	what string
	tok  int64
}

// A holder process stopped with SIGSTOP past its TTL while it holds the
// mutex: stopped before its transaction's Guard, its Guard after resuming is
// refused (another holder has committed with a higher token meanwhile);
// stopped after Guard, its transaction commits first and the next holder's
// Guard waits for it. 8 processes commit 1,000 guarded read-modify-write
// increments between them, and the counter ends equal to the number of
// committed transactions: no update is lost.
func TestPausedHoldersGuardedIncrements(t *testing.T) {
	const procs, each = 8, 125
	ttl := time.Second
	pg := pgtest.Start(t)
	db := pg.Open(t)
	ctx := testutil.Ctx(t, 90*time.Second)
	for _, q := range []string{fence.Schema,
		"CREATE TABLE counter (n bigint NOT NULL)", "INSERT INTO counter VALUES (0)",
		"CREATE TABLE commits (token bigint PRIMARY KEY)"} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	testutil.InitEpoch(t, addr, ns)

	// Victims, at spread-out attempts so that the pauses rarely overlap
	// (they may: the bookkeeping below is per victim).
	pauses := map[int][2]int{1: {10, 0}, 2: {0, 25}, 3: {45, 0}, 4: {0, 70}}
	lines := make(chan line, 1024)
	hs := make([]*holder, procs)
	for i := range procs {
		cfg := helperConfig{Redis: addr, Namespace: ns, DSN: pg.DSN(), TTL: ttl, Increments: each,
			PauseBefore: pauses[i][0], PauseAfter: pauses[i][1]}
		hs[i] = startHolder(t, i, cfg, lines)
	}

	type victim struct {
		tok     int64
		after   bool
		granted bool // a later token was granted the mutex
	}
	victims := map[int]*victim{}
	resume := func(p int) {
		if _, err := io.WriteString(hs[p].stdin, "go\n"); err != nil {
			t.Fatalf("p%d: %v", p, err)
		}
		if err := hs[p].cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatalf("p%d: SIGCONT: %v", p, err)
		}
	}
	results := map[int64]string{} // a victim's token -> its outcome
	victimTok := map[int64]bool{}
	var commits, stale, done int
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for done < procs {
		select {
		case l := <-lines:
			switch l.what {
			case "pause-before", "pause-after":
				if err := hs[l.proc].cmd.Process.Signal(syscall.SIGSTOP); err != nil {
					t.Fatalf("p%d: SIGSTOP: %v", l.proc, err)
				}
				victims[l.proc] = &victim{tok: l.tok, after: l.what == "pause-after"}
				victimTok[l.tok] = true
				t.Logf("p%d stopped holding token %d (%s)", l.proc, l.tok, l.what)
			case "locked":
				for _, v := range victims {
					v.granted = v.granted || l.tok > v.tok
				}
			case "commit", "stale":
				if l.what == "commit" {
					commits++
				} else {
					stale++
				}
				if victimTok[l.tok] {
					results[l.tok] = l.what
				}
				for p, v := range victims {
					if !v.after && l.what == "commit" && l.tok > v.tok {
						delete(victims, p) // a newer holder committed: wake the stale one
						resume(p)
					}
				}
			case "done":
				done++
			case "exit":
				t.Fatalf("p%d exited before it was done", l.proc)
			}
		case <-tick.C:
			// A victim stopped after its Guard holds the guard row: wake it
			// once a newer holder waits for that row.
			for p, v := range victims {
				if v.after && v.granted && guardWaiting(ctx, db) {
					delete(victims, p)
					resume(p)
				}
			}
		case <-ctx.Done():
			t.Fatalf("timed out: %d commits, %d stale, %d done, victims %v", commits, stale, done, victims)
		}
	}

	var n, rows int64
	if err := db.QueryRowContext(ctx, "SELECT (SELECT n FROM counter), (SELECT count(*) FROM commits)").Scan(&n, &rows); err != nil {
		t.Fatal(err)
	}
	t.Logf("counter %d, %d committed transactions (%d reported), %d refused as stale", n, rows, commits, stale)
	if n != rows || rows != int64(commits) || n != procs*each {
		t.Fatalf("counter %d, committed transactions %d (reported %d): want both %d: an update was lost", n, rows, commits, procs*each)
	}
	var before, after int
	for _, r := range results {
		if r == "stale" {
			before++
		} else {
			after++
		}
	}
	if before != 2 || after != 2 {
		t.Fatalf("victims' outcomes %v: want 2 refused (stopped before Guard) and 2 committed (stopped after)", results)
	}
}

// startHolder starts the test binary again as holder process i running
// cfg; its stdout lines arrive on lines, then an "exit" line.
func startHolder(t *testing.T, i int, cfg helperConfig, lines chan<- line) *holder {
	t.Helper()
	ch := testutil.StartChild(t, helperEnv, cfg, fmt.Sprintf("holder%d.log", i))
	cmd, stdin, out := ch.Cmd, ch.Stdin, ch.Stdout
	exited := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			what, tok, _ := strings.Cut(sc.Text(), " ")
			n, _ := strconv.ParseInt(tok, 10, 64)
			lines <- line{proc: i, what: what, tok: n}
		}
		if err := cmd.Wait(); err != nil {
			b, _ := os.ReadFile(ch.Log)
			t.Logf("holder %d: %v\n%s", i, err, b)
			select { // unless the test has stopped reading
			case lines <- line{proc: i, what: "exit"}:
			default:
			}
		}
		close(exited)
	}()
	t.Cleanup(func() { // a holder that is done exits by itself
		_ = cmd.Process.Signal(syscall.SIGCONT)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	return &holder{idx: i, cmd: cmd, stdin: stdin}
}
