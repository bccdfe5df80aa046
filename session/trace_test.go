package session_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/leasehold/leasehold/flight"
	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/mutex"
	"github.com/leasehold/leasehold/session"
)

// TestTracing: with a tracer provider installed, a Lock is a span with
// its token, whether it was handed over and, when it queued, its queue
// position; a failed TryLock is a span with an error; each hold is a span
// that ends with the hold, with an event saying why (released, revoked);
// a flight Do is a span.
func TestTracing(t *testing.T) {
	rec := spanRecorder()

	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 20*time.Second)
	s1 := testutil.Dial(t, addr, ns, session.Options{TTL: 5 * time.Second})
	s2 := testutil.Dial(t, addr, ns, session.Options{TTL: 5 * time.Second})

	h1, err := mutex.New(s1, "traced").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mutex.New(s2, "traced").TryLock(ctx); !errors.Is(err, mutex.ErrLocked) {
		t.Fatalf("TryLock of a held mutex: %v, want ErrLocked", err)
	}
	got := make(chan error, 1)
	go func() {
		h2, err := mutex.New(s2, "traced").Lock(ctx)
		if err == nil {
			_, err = mutex.New(s1, "traced").Reset(ctx) // h2 ends revoked
			<-h2.Done()
		}
		got <- err
	}()
	// Release once s2 waits (its hold id queued, as Holder shows).
	for {
		st, err := mutex.New(s1, "traced").Holder(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Waiters > 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the second Lock never queued")
		case <-time.After(5 * time.Millisecond): // polls Redis, no stand-in for an event
		}
	}
	if err := h1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}

	if _, err := flight.New(s1, "traced", flight.Options{}).Do(ctx, "k", func(context.Context) ([]byte, error) {
		return []byte("v"), nil
	}); err != nil {
		t.Fatal(err)
	}

	var locks, tries, holds, flights []sdktrace.ReadOnlySpan
	for _, sp := range rec.Ended() {
		if attr(sp.Attributes(), "leasehold.namespace").AsString() != ns {
			continue
		}
		switch {
		case sp.Name() == "flight.Do" || attr(sp.Attributes(), "leasehold.name").AsString() != "traced":
			// the flight's own mutex, below
		case sp.Name() == "mutex.Lock":
			locks = append(locks, sp)
		case sp.Name() == "mutex.TryLock":
			tries = append(tries, sp)
		case sp.Name() == "mutex.hold":
			holds = append(holds, sp)
		}
		if sp.Name() == "flight.Do" && attr(sp.Attributes(), "leasehold.key").AsString() == "k" {
			flights = append(flights, sp)
		}
	}
	if len(locks) != 2 || len(tries) != 1 || len(holds) != 2 {
		t.Fatalf("spans: %d mutex.Lock, %d mutex.TryLock, %d mutex.hold; want 2, 1, 2", len(locks), len(tries), len(holds))
	}
	if len(flights) != 1 {
		t.Errorf("%d flight.Do spans for key k, want 1", len(flights))
	}
	if tries[0].Status().Code != codes.Error {
		t.Errorf("failed TryLock span status %v, want Error", tries[0].Status())
	}
	first, second := locks[0], locks[1]
	if first.StartTime().After(second.StartTime()) {
		first, second = second, first
	}
	if attr(first.Attributes(), "leasehold.handoff").AsBool() || attr(first.Attributes(), "leasehold.token").AsInt64() != h1.Token() {
		t.Errorf("first Lock span: %v; want no hand-off and token %d", first.Attributes(), h1.Token())
	}
	if !attr(second.Attributes(), "leasehold.handoff").AsBool() || !has(second.Attributes(), "leasehold.queue_position") ||
		attr(second.Attributes(), "leasehold.queue_position").AsInt64() != 0 || attr(second.Attributes(), "leasehold.token").AsInt64() <= h1.Token() {
		t.Errorf("queued Lock span: %v; want a hand-off, queue position 0 and a token above %d", second.Attributes(), h1.Token())
	}
	reasons := map[string]bool{}
	for _, h := range holds {
		for _, ev := range h.Events() {
			if ev.Name == "hold ended" {
				reasons[attr(ev.Attributes, "leasehold.reason").AsString()] = true
			}
		}
	}
	if !reasons["released"] || !reasons["revoked"] {
		t.Errorf("hold end reasons %v, want released and revoked", reasons)
	}
}

// spanRecorder returns the recorder of the test binary's tracer provider,
// installed once: otel's global tracers delegate to the first provider set
// (a later one is not seen by tracers made before), as in a program that
// sets its provider at start. Tests tell their spans apart by namespace.
var spanRecorder = sync.OnceValue(func() *tracetest.SpanRecorder {
	rec := tracetest.NewSpanRecorder()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	return rec
})

func has(kvs []attribute.KeyValue, key string) bool {
	for _, kv := range kvs {
		if string(kv.Key) == key {
			return true
		}
	}
	return false
}

func attr(kvs []attribute.KeyValue, key string) attribute.Value {
	for _, kv := range kvs {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}
