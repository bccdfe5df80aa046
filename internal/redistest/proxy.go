package redistest

import (
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy is a network fault layer between a client and Redis: it
// forwards TCP connections to an upstream address and can delay every byte
// (Latency), stop forwarding while keeping connections open (Blackhole: a
// silent partition), and reset every open connection (Reset: RST, as a
// middlebox or a crashed peer would). The chaos suite puts one between each
// holder process and Redis.
type Proxy struct {
	ln net.Listener

	mu       sync.Mutex
	upstream string
	cond     *sync.Cond
	holed    bool
	latency  time.Duration
	closed   bool
	links    map[*link]struct{}
	wg       sync.WaitGroup
}

type link struct {
	c, u   net.Conn
	closed bool // under Proxy.mu
}

// StartProxy listens on a free loopback port and forwards to upstream until
// the end of the test.
func StartProxy(t testing.TB, upstream string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("chaos: proxy listen: %v", err)
	}
	p := &Proxy{ln: ln, upstream: upstream, links: map[*link]struct{}{}}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Go(p.accept)
	t.Cleanup(p.Close)
	return p
}

// Addr is the address clients dial.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Blackhole stops (true) or resumes (false) forwarding on every connection,
// new ones included. Bytes sent meanwhile are delivered once it is lifted,
// as TCP retransmissions would be.
func (p *Proxy) Blackhole(on bool) {
	p.mu.Lock()
	p.holed = on
	p.mu.Unlock()
	p.cond.Broadcast()
}

// Latency delays every chunk by d in each direction (0: none).
func (p *Proxy) Latency(d time.Duration) {
	p.mu.Lock()
	p.latency = d
	p.mu.Unlock()
	p.cond.Broadcast()
}

// Reset closes every open connection with an RST; new connections are
// forwarded as before. It returns how many connections it reset.
func (p *Proxy) Reset() int {
	p.mu.Lock()
	n := 0
	for l := range p.links {
		p.closeLink(l)
		n++
	}
	p.mu.Unlock()
	p.cond.Broadcast()
	return n
}

// Retarget forwards new connections to upstream and resets every open one,
// as a failover that moves a service address to another server would.
func (p *Proxy) Retarget(upstream string) {
	p.mu.Lock()
	p.upstream = upstream
	p.mu.Unlock()
	p.Reset()
}

// closeLink closes both ends of l with RST. p.mu held.
func (p *Proxy) closeLink(l *link) {
	if l.closed {
		return
	}
	l.closed = true
	delete(p.links, l)
	for _, c := range []net.Conn{l.c, l.u} {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = c.Close()
	}
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		upstream := p.upstream
		p.mu.Unlock()
		u, err := net.DialTimeout("tcp", upstream, time.Second)
		if err != nil {
			c.Close()
			continue
		}
		l := &link{c: c, u: u}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			u.Close()
			return
		}
		p.links[l] = struct{}{}
		p.mu.Unlock()
		p.wg.Go(func() { p.pipe(l, u, c) })
		p.wg.Go(func() { p.pipe(l, c, u) })
	}
}

type chunk struct {
	b  []byte
	at time.Time
}

// pipe copies src to dst through a queue, so that latency delays chunks
// without reordering them and a blackhole holds them.
func (p *Proxy) pipe(l *link, dst, src net.Conn) {
	q := make(chan chunk, 256)
	done := make(chan struct{})
	go func() { // writer
		defer close(done)
		for ch := range q {
			if !p.wait(l, ch.at) {
				return
			}
			if _, err := dst.Write(ch.b); err != nil {
				return
			}
		}
	}()
	for {
		buf := make([]byte, 16<<10)
		n, err := src.Read(buf)
		if n > 0 {
			select {
			case q <- chunk{buf[:n], time.Now()}:
			case <-done:
				err = net.ErrClosed
			}
		}
		if err != nil {
			break
		}
	}
	p.mu.Lock()
	p.closeLink(l) // the other direction's writer stops too
	p.mu.Unlock()
	p.cond.Broadcast()
	close(q)
	<-done
}

// wait blocks until a chunk read at "at" may be written: its latency is over
// and no blackhole is on. It reports false when the link or proxy closed.
func (p *Proxy) wait(l *link, at time.Time) bool {
	for {
		p.mu.Lock()
		for p.holed && !l.closed && !p.closed {
			p.cond.Wait()
		}
		if l.closed || p.closed {
			p.mu.Unlock()
			return false
		}
		due := at.Add(p.latency)
		p.mu.Unlock()
		d := time.Until(due)
		if d <= 0 {
			return true
		}
		time.Sleep(min(d, 20*time.Millisecond)) // re-read latency and blackhole
	}
}

// Close stops the proxy and closes every connection; it waits for its
// goroutines.
func (p *Proxy) Close() {
	p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for l := range p.links {
		p.closeLink(l)
	}
	p.mu.Unlock()
	p.cond.Broadcast()
	p.wg.Wait()
}
