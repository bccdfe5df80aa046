package lease

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// lockedBuffer is a bytes.Buffer safe for the log queue's goroutine and
// the test's.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestTimingClockStepLogged: the heartbeat compares the server's TIME
// between two renewals with the client's monotonic clock. Renewals on a
// server whose clock runs with the client's log nothing; a forward step of
// the server's wall clock (which ends Redis' keys early: here 2s of a 10s
// lease) is logged at the next renewal, with its size.
func TestTimingClockStepLogged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 10 * time.Second
		r := newRig(t, ttl)
		var logs lockedBuffer
		s := r.open(Options{TTL: ttl, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		for range 3 {
			r.untilNextBeat(s)
		}
		synctest.Wait()
		if strings.Contains(logs.String(), "clock stepped") {
			t.Fatalf("a clock step logged without one:\n%s", logs.String())
		}
		// The server's clock reads 2s more than the client's at the next
		// renewal (miniredis' clock stands still from here on).
		r.m.SetTime(time.Now().Add(s.opt.Heartbeat + 2*time.Second))
		r.untilNextBeat(s)
		synctest.Wait()
		out := logs.String()
		if !strings.Contains(out, "the Redis server's clock stepped") || !strings.Contains(out, "step=2.00") {
			t.Fatalf("no record of the 2s step:\n%s", out)
		}
		if err := s.Err(); err != nil {
			t.Fatalf("session: %v", err)
		}
	})
}
