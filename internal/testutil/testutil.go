// Package testutil holds helpers shared by leasehold's tests: goleak options
// and session constructors against real Redis.
package testutil

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/goleak"

	"github.com/leasehold/leasehold/session"
)

// LeakOptions ignores goroutines rueidis leaves sleeping after Close.
var LeakOptions = []goleak.Option{
	goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient)._refresh.func2"),
	goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient).redirectOrNew.func1"),
	goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*standalone).redirectToPrimary.func1"),
}

// ClientOption returns the rueidis options tests use for addr.
func ClientOption(addr string) rueidis.ClientOption {
	return rueidis.ClientOption{
		InitAddress:       []string{addr},
		DisableCache:      true,
		ForceSingleClient: true,
		ConnWriteTimeout:  time.Second,
	}
}

// Dial opens a session (owning its client) on addr in namespace ns, closed at
// the end of the test.
func Dial(t testing.TB, addr, ns string, o session.Options) *session.Session {
	t.Helper()
	o.Namespace = ns
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := session.Dial(ctx, ClientOption(addr), o)
	if err != nil {
		t.Fatalf("session.Dial: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Client returns a rueidis client to addr, closed at the end of the test.
func Client(t testing.TB, addr string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(ClientOption(addr))
	if err != nil {
		t.Fatalf("rueidis.NewClient: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// Ctx returns a context canceled after d or at the end of the test.
func Ctx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
