package testutil

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/rueidis"
)

// CountingClient counts the requests sent through it: one per Do, one per
// DoMulti (a pipeline is one round trip). A session's notification
// connection (a dedicated one) is not counted: it only receives.
type CountingClient struct {
	rueidis.Client
	N atomic.Int64
}

// Do counts one request and sends cmd.
func (c *CountingClient) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.N.Add(1)
	return c.Client.Do(ctx, cmd)
}

// DoMulti counts one request and sends cmds.
func (c *CountingClient) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	c.N.Add(1)
	return c.Client.DoMulti(ctx, cmds...)
}

// Keys returns every key of c's database, sorted: tests compare them before
// and after calls that must change nothing.
func Keys(t testing.TB, ctx context.Context, c rueidis.Client) []string {
	t.Helper()
	ks, err := c.Do(ctx, c.B().Keys().Pattern("*").Build()).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ks)
	return ks
}

// MutexHolder returns the hold id holding mutex key (the first field of
// the mutex string "<hid>|<tok>|...", see internal/scripts/mutex_lib.lua),
// or "" when nobody holds it or the key does not exist.
func MutexHolder(ctx context.Context, c rueidis.Client, key string) (string, error) {
	v, err := c.Do(ctx, c.B().Get().Key(key).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	hid, _, _ := strings.Cut(v, "|")
	return hid, nil
}
