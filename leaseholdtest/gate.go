package leaseholdtest

import (
	"sync"

	"github.com/alicebob/miniredis/v2/server"
)

// gate holds miniredis' commands while the server is paused. It is installed
// as the server's pre-command hook, which miniredis runs before every command,
// including each redis.call of a script: a script that was running when Pause
// began stops at its next redis.call, as a SIGSTOPped redis-server stops
// wherever it is. Nothing is answered while paused; the held commands run in
// order on Resume. Once the gate is shut (the server is killed), held and new
// commands are dropped unanswered, and a held redis.call fails its script.
type gate struct {
	mu     sync.Mutex
	cond   *sync.Cond // signalled when paused or shut change
	paused bool
	shut   bool
}

func newGate() *gate {
	g := &gate{}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// hook is the miniredis pre-command hook: it reports true ("handled") to drop
// a command, false to let miniredis run it.
func (g *gate) hook(*server.Peer, string, ...string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.paused && !g.shut {
		g.cond.Wait()
	}
	return g.shut
}

func (g *gate) set(paused bool) {
	g.mu.Lock()
	g.paused = paused
	g.mu.Unlock()
	g.cond.Broadcast()
}

func (g *gate) isPaused() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.paused
}

// close drops every held and later command, so that miniredis can close.
func (g *gate) close() {
	g.mu.Lock()
	g.shut = true
	g.mu.Unlock()
	g.cond.Broadcast()
}
