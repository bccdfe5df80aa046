package scripts

import (
	"context"

	"github.com/redis/rueidis"
)

// Bound returns c with Do and DoMulti that return when their ctx ends, even
// when rueidis would keep them waiting: a call that finds its connection
// being redialled by another goroutine waits for that dial (rueidis'
// singleconnect wait ignores the caller's ctx), and a dial to a stalled
// server takes up to ConnWriteTimeout. The abandoned call finishes in its
// own goroutine: rueidis checks ctx again before writing, and a call that
// was already on the wire has an unknown outcome, which callers handle as
// for any other error (Claim withdraws the hold id). The error is ctx.Err(),
// as rueidis itself reports a ctx that ended, and a reply that is ready when
// ctx ends is still returned.
func Bound(c rueidis.Client) rueidis.Client { return bounded{c} }

type bounded struct{ rueidis.Client }

func (c bounded) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	return within(ctx, func() rueidis.RedisResult { return c.Client.Do(ctx, cmd) },
		func(err error) rueidis.RedisResult { return rueidis.NewErrorResult(err) })
}

func (c bounded) DoMulti(ctx context.Context, multi ...rueidis.Completed) []rueidis.RedisResult {
	return within(ctx, func() []rueidis.RedisResult { return c.Client.DoMulti(ctx, multi...) },
		func(err error) []rueidis.RedisResult { return failed(len(multi), err) })
}

// within runs call, returning its result, or failed(ctx.Err()) when ctx ends
// first (call then finishes in its goroutine).
func within[T any](ctx context.Context, call func() T, failed func(error) T) T {
	if ctx.Done() == nil {
		return call()
	}
	ch := make(chan T, 1)
	go func() { ch <- call() }()
	select {
	case r := <-ch:
		return r
	case <-ctx.Done():
		select {
		case r := <-ch:
			return r
		default:
			return failed(ctx.Err())
		}
	}
}
