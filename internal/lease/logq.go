package lease

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
)

// logQueue hands the loop's log records to a goroutine of their own. The
// loop owns the local deadline, and a record handled in place runs the
// user's slog.Handler on it: a handler that blocks (a full stderr pipe, a
// log shipper on the very network that just failed the heartbeats) would
// hold up the cancellation of every hold past the deadline. Records beyond
// the buffer are dropped, and the next record that gets through is preceded
// by one saying how many. The session's scripts.Env logs through it too (its
// helpers run on the loop's behalf). After close, records are handled on the
// caller's goroutine.
type logQueue struct {
	mu      sync.RWMutex  // guards closed against sends on a closed q
	closed  bool          // guarded by mu
	q       chan queued   // immutable; sent to under mu.RLock, closed under mu.Lock
	dropped atomic.Int64  // records dropped since the last one handled; any goroutine
	done    chan struct{} // immutable; closed when run has handled the last record
}

type queued struct {
	h slog.Handler
	r slog.Record
}

// logQueueLen is ample for the loop's few records per heartbeat interval.
const logQueueLen = 64

// newLogQueue starts the queue's goroutine; close ends it once drained.
func newLogQueue() *logQueue {
	lq := &logQueue{q: make(chan queued, logQueueLen), done: make(chan struct{})}
	go lq.run()
	return lq
}

func (lq *logQueue) run() {
	defer close(lq.done)
	ctx := context.Background()
	for it := range lq.q {
		if n := lq.dropped.Swap(0); n > 0 {
			r := slog.NewRecord(it.r.Time, slog.LevelWarn, "session log records dropped: the handler was too slow", 0)
			r.AddAttrs(slog.Int64("dropped", n))
			_ = it.h.Handle(ctx, r)
		}
		_ = it.h.Handle(ctx, it.r)
	}
}

// close ends the goroutine after the records queued so far; it does not
// wait for a slow handler (done tells when it is over).
func (lq *logQueue) close() {
	lq.mu.Lock()
	defer lq.mu.Unlock()
	if !lq.closed {
		lq.closed = true
		close(lq.q)
	}
}

// logger returns a logger that queues its records for h.
func (lq *logQueue) logger(h slog.Handler) *slog.Logger {
	return slog.New(queueHandler{lq: lq, h: h})
}

// queueHandler is the slog.Handler of logQueue.logger.
type queueHandler struct {
	lq *logQueue
	h  slog.Handler
}

func (q queueHandler) Enabled(ctx context.Context, l slog.Level) bool { return q.h.Enabled(ctx, l) }

func (q queueHandler) Handle(ctx context.Context, r slog.Record) error {
	q.lq.mu.RLock()
	defer q.lq.mu.RUnlock()
	if q.lq.closed {
		return q.h.Handle(ctx, r)
	}
	select {
	case q.lq.q <- queued{h: q.h, r: r.Clone()}:
	default:
		q.lq.dropped.Add(1)
	}
	return nil
}

func (q queueHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return queueHandler{lq: q.lq, h: q.h.WithAttrs(as)}
}

func (q queueHandler) WithGroup(name string) slog.Handler {
	return queueHandler{lq: q.lq, h: q.h.WithGroup(name)}
}
