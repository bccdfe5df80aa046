// Package lease is the machinery behind package session: the lease, its
// loop goroutine (the actor: heartbeat, local deadline, pending releases,
// notification subscription), the hold table, the claim path and the
// notification routing. Package session is its public face: session.Session
// and session.Hold wrap Session and Hold and export nothing internal; the
// primitives reach the rest through internal/hook. See docs/architecture.md.
package lease
