package redistest

import (
	"net"
	"sync"
	"testing"
)

// Proxy forwards TCP connections to a Redis server and can stop forwarding
// (a blackhole: connections stay open, bytes stop flowing) to simulate a
// partition between one client and the server.
type Proxy struct {
	ln       net.Listener
	upstream string

	mu     sync.Mutex
	cond   *sync.Cond
	holed  bool
	closed bool
	conns  []net.Conn
	wg     sync.WaitGroup
}

// StartProxy listens on a free loopback port and forwards to upstream until
// the end of the test.
func StartProxy(t testing.TB, upstream string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: proxy listen: %v", err)
	}
	p := &Proxy{ln: ln, upstream: upstream}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's address.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Blackhole stops (true) or resumes (false) forwarding on every connection.
func (p *Proxy) Blackhole(on bool) {
	p.mu.Lock()
	p.holed = on
	p.mu.Unlock()
	p.cond.Broadcast()
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.upstream)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			u.Close()
			return
		}
		p.conns = append(p.conns, c, u)
		p.mu.Unlock()
		p.wg.Go(func() { p.pipe(u, c) })
		p.wg.Go(func() { p.pipe(c, u) })
	}
}

// pipe copies src to dst, holding each chunk while the proxy is blackholed.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.holed {
				p.cond.Wait()
			}
			p.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *Proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	p.holed, p.closed = false, true
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.cond.Broadcast()
	p.wg.Wait()
}
