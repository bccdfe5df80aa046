package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// counter counts the requests (commands) one client sends. Commands whose
// first key is a leasehold lease ({ns}:s:<sid>: open, heartbeat, close) are
// counted apart, so that a worker's own requests can be told from its
// session's background heartbeat.
type counter struct {
	reqs  atomic.Int64 // commands, lease commands excluded
	lease atomic.Int64 // commands on a leasehold lease key
	trips atomic.Int64 // Do/DoMulti calls: round trips

	leaseLat *latencies // when set, the latency of each lease command
}

func (c *counter) total() int64 { return c.reqs.Load() + c.lease.Load() }

// isLease reports whether cmd is a script call whose first key is a leasehold
// session lease: {ns}:s:<sid>.
func isLease(cmd []string) bool {
	if len(cmd) < 4 {
		return false
	}
	switch cmd[0] {
	case "EVALSHA", "EVAL", "EVALSHA_RO", "EVAL_RO":
		return strings.Contains(cmd[3], "}:s:")
	}
	return false
}

func (c *counter) add(cmd []string) bool {
	if isLease(cmd) {
		c.lease.Add(1)
		return true
	}
	c.reqs.Add(1)
	return false
}

// countingClient wraps a rueidis.Client and counts what goes through it.
// rueidis' Lua.Exec calls Client.Do, so script calls are counted too.
type countingClient struct {
	rueidis.Client
	c *counter
}

func wrap(c rueidis.Client, cnt *counter) rueidis.Client { return &countingClient{Client: c, c: cnt} }

func (w *countingClient) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	return w.c.do(ctx, cmd, w.Client.Do)
}

// do counts cmd and sends it with send, timing it when it is a lease command
// and lease latencies are wanted.
func (c *counter) do(ctx context.Context, cmd rueidis.Completed,
	send func(context.Context, rueidis.Completed) rueidis.RedisResult) rueidis.RedisResult {
	c.trips.Add(1)
	if c.add(cmd.Commands()) && c.leaseLat != nil {
		t := time.Now()
		r := send(ctx, cmd)
		c.leaseLat.add(time.Since(t))
		return r
	}
	return send(ctx, cmd)
}

func (w *countingClient) DoMulti(ctx context.Context, multi ...rueidis.Completed) []rueidis.RedisResult {
	w.c.trips.Add(1)
	for _, m := range multi {
		w.c.add(m.Commands())
	}
	return w.Client.DoMulti(ctx, multi...)
}

func (w *countingClient) DoCache(ctx context.Context, cmd rueidis.Cacheable, ttl time.Duration) rueidis.RedisResult {
	w.c.trips.Add(1)
	w.c.add(cmd.Commands())
	return w.Client.DoCache(ctx, cmd, ttl)
}

func (w *countingClient) DoMultiCache(ctx context.Context, multi ...rueidis.CacheableTTL) []rueidis.RedisResult {
	w.c.trips.Add(1)
	for _, m := range multi {
		w.c.add(m.Cmd.Commands())
	}
	return w.Client.DoMultiCache(ctx, multi...)
}

func (w *countingClient) DoStream(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResultStream {
	w.c.trips.Add(1)
	w.c.add(cmd.Commands())
	return w.Client.DoStream(ctx, cmd)
}

func (w *countingClient) DoMultiStream(ctx context.Context, multi ...rueidis.Completed) rueidis.MultiRedisResultStream {
	w.c.trips.Add(1)
	for _, m := range multi {
		w.c.add(m.Commands())
	}
	return w.Client.DoMultiStream(ctx, multi...)
}

func (w *countingClient) Receive(ctx context.Context, sub rueidis.Completed, fn func(rueidis.PubSubMessage)) error {
	w.c.trips.Add(1)
	w.c.add(sub.Commands())
	return w.Client.Receive(ctx, sub, fn)
}

func (w *countingClient) Dedicated(fn func(rueidis.DedicatedClient) error) error {
	return w.Client.Dedicated(func(d rueidis.DedicatedClient) error { return fn(&countingDedicated{d, w.c}) })
}

func (w *countingClient) Dedicate() (rueidis.DedicatedClient, func()) {
	d, cancel := w.Client.Dedicate()
	return &countingDedicated{d, w.c}, cancel
}

// Nodes wraps every node: Lua.ExecMulti sends SCRIPT LOAD through them.
func (w *countingClient) Nodes() map[string]rueidis.Client {
	out := map[string]rueidis.Client{}
	for k, v := range w.Client.Nodes() {
		out[k] = &countingClient{Client: v, c: w.c}
	}
	return out
}

type countingDedicated struct {
	rueidis.DedicatedClient
	c *counter
}

// Do counts (and times lease commands) as countingClient.Do does.
func (w *countingDedicated) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	return w.c.do(ctx, cmd, w.DedicatedClient.Do)
}

func (w *countingDedicated) DoMulti(ctx context.Context, multi ...rueidis.Completed) []rueidis.RedisResult {
	w.c.trips.Add(1)
	for _, m := range multi {
		w.c.add(m.Commands())
	}
	return w.DedicatedClient.DoMulti(ctx, multi...)
}

func (w *countingDedicated) Receive(ctx context.Context, sub rueidis.Completed, fn func(rueidis.PubSubMessage)) error {
	w.c.trips.Add(1)
	w.c.add(sub.Commands())
	return w.DedicatedClient.Receive(ctx, sub, fn)
}

// goRedisHook counts the commands a go-redis client sends.
type goRedisHook struct{ c *counter }

func (h goRedisHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h goRedisHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.c.trips.Add(1)
		h.c.reqs.Add(1)
		return next(ctx, cmd)
	}
}

func (h goRedisHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.c.trips.Add(1)
		h.c.reqs.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// latencies collects durations from many goroutines.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

func (l *latencies) take() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.d
	l.d = nil
	return d
}

// pct returns the p-th percentile (0..100) of d, sorting it in place.
func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	i := int(p / 100 * float64(len(d)-1))
	return d[i]
}

// countDials returns opt with a DialCtxFn whose connections count the
// requests written to them in cnt: for a leasehold session's own connection
// (session.Options.Conn), which carries one request per write (rueidis'
// synchronous mode, one call at a time), so that its requests count like
// those of the wrapped client.
func countDials(opt rueidis.ClientOption, cnt *counter) rueidis.ClientOption {
	opt.DialCtxFn = func(ctx context.Context, dst string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
		c, err := d.DialContext(ctx, "tcp", dst)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: c, c: cnt}, nil
	}
	return opt
}

// countingConn counts each request written to it (see countDials).
type countingConn struct {
	net.Conn
	c *counter
}

func (w *countingConn) Write(b []byte) (int, error) {
	if len(b) > 0 && b[0] == '*' {
		w.c.trips.Add(1)
		if leaseRequest(b) {
			w.c.lease.Add(1)
		} else {
			w.c.reqs.Add(1)
		}
	}
	return w.Conn.Write(b)
}

// leaseRequest is isLease for the RESP request array at the start of b,
// read without allocating (it runs on every request of a measured run):
// "*<n>", then "$<len>" and the value of each argument, CRLF-separated.
func leaseRequest(b []byte) bool {
	var part [9][]byte
	rest := b
	for i := range part {
		j := bytes.Index(rest, crlf)
		if j < 0 {
			return false
		}
		part[i], rest = rest[:j], rest[j+2:]
	}
	switch string(part[2]) {
	case "EVALSHA", "EVAL", "EVALSHA_RO", "EVAL_RO":
		return bytes.Contains(part[8], leaseInfix)
	}
	return false
}

var crlf, leaseInfix = []byte("\r\n"), []byte("}:s:")
