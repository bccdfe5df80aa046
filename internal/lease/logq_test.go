package lease

import (
	"context"
	"log/slog"
	"sync"
	"testing"
)

// recording is a slog.Handler that blocks until gate is closed, then records
// each message and its "dropped" attribute.
type recording struct {
	gate chan struct{}
	mu   *sync.Mutex
	msgs *[]string
	drop *int64
}

func (h recording) Enabled(context.Context, slog.Level) bool { return true }
func (h recording) Handle(_ context.Context, r slog.Record) error {
	<-h.gate
	h.mu.Lock()
	defer h.mu.Unlock()
	*h.msgs = append(*h.msgs, r.Message)
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "dropped" {
			*h.drop += a.Value.Int64()
		}
		return true
	})
	return nil
}
func (h recording) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recording) WithGroup(string) slog.Handler      { return h }

// TestLogQueueNeverBlocks: with the handler stuck, logging returns at once;
// records beyond the buffer are dropped and counted, and every record is
// accounted for once the handler moves again.
func TestLogQueueNeverBlocks(t *testing.T) {
	h := recording{gate: make(chan struct{}), mu: new(sync.Mutex), msgs: new([]string), drop: new(int64)}
	lq := newLogQueue()
	log := lq.logger(h)
	const n = 3 * logQueueLen
	for range n {
		log.Info("record") // returns although the handler is blocked
	}
	close(h.gate)
	lq.close()
	<-lq.done
	kept := 0
	for _, m := range *h.msgs {
		if m == "record" {
			kept++
		}
	}
	if kept+int(*h.drop) != n || *h.drop == 0 {
		t.Fatalf("%d records handled, %d reported dropped; want %d in all, some dropped", kept, *h.drop, n)
	}
}
