package demo

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"

	"github.com/redis/rueidis"
)

// dialFunc is rueidis' ClientOption.DialCtxFn.
type dialFunc = func(ctx context.Context, addr string, d *net.Dialer, cfg *tls.Config) (net.Conn, error)

// network sits between the demo's nodes and Redis. It can cut one node's
// link (the node "crashes": its heartbeats stop) or every link (a Redis
// outage). A cut closes the link's connections, and new dials hang until the
// link is back or the dial's context ends, as they would against a host
// that does not answer.
type network struct {
	base dialFunc

	mu      sync.Mutex
	outage  bool
	closed  bool
	changed chan struct{} // closed and replaced on every change
	conns   map[*conn]*link
}

// link is one node's path to Redis.
type link struct {
	n    *network
	down bool // guarded by n.mu
}

var errUnreachable = errors.New("demo network: Redis unreachable")

func newNetwork(opt rueidis.ClientOption) *network {
	base := opt.DialCtxFn // unix:// URLs
	if base == nil {
		base = func(ctx context.Context, addr string, d *net.Dialer, cfg *tls.Config) (net.Conn, error) {
			if cfg != nil {
				return (&tls.Dialer{NetDialer: d, Config: cfg}).DialContext(ctx, "tcp", addr)
			}
			return d.DialContext(ctx, "tcp", addr)
		}
	}
	return &network{base: base, changed: make(chan struct{}), conns: map[*conn]*link{}}
}

func (n *network) link() *link { return &link{n: n} }

// blocked reports whether l cannot reach Redis. n.mu held.
func (n *network) blocked(l *link) bool { return n.outage || l.down }

// dial is the DialCtxFn of l's client.
func (l *link) dial(ctx context.Context, addr string, d *net.Dialer, cfg *tls.Config) (net.Conn, error) {
	n := l.n
	for {
		n.mu.Lock()
		closed, blocked, changed := n.closed, n.blocked(l), n.changed
		n.mu.Unlock()
		if closed {
			return nil, errUnreachable
		}
		if !blocked {
			break
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("dial %s: %w (%w)", addr, errUnreachable, ctx.Err())
		}
	}
	c, err := n.base(ctx, addr, d, cfg)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed || n.blocked(l) {
		c.Close()
		return nil, errUnreachable
	}
	tc := &conn{Conn: c, n: n}
	n.conns[tc] = l
	return tc, nil
}

// set changes the state with f under the lock, wakes waiting dials and
// closes the connections of links that are now cut.
func (n *network) set(f func()) {
	n.mu.Lock()
	f()
	close(n.changed)
	n.changed = make(chan struct{})
	var cut []*conn
	for c, l := range n.conns {
		if n.closed || n.blocked(l) {
			cut = append(cut, c)
			delete(n.conns, c)
		}
	}
	n.mu.Unlock()
	for _, c := range cut {
		c.Conn.Close()
	}
}

// cut takes l down (true) or brings it back (false).
func (l *link) cut(down bool) { l.n.set(func() { l.down = down }) }

// setOutage takes every link down (true) or brings them back (false).
func (n *network) setOutage(on bool) { n.set(func() { n.outage = on }) }

// close makes every dial fail at once and closes every connection.
func (n *network) close() { n.set(func() { n.closed = true }) }

type conn struct {
	net.Conn
	n *network
}

func (c *conn) Close() error {
	c.n.mu.Lock()
	delete(c.n.conns, c)
	c.n.mu.Unlock()
	return c.Conn.Close()
}
