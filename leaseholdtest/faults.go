package leaseholdtest

import (
	"context"
	"fmt"

	"github.com/leasehold/leasehold/election"
	"github.com/leasehold/leasehold/mutex"
	"github.com/leasehold/leasehold/pool"
	"github.com/leasehold/leasehold/rwmutex"
	"github.com/leasehold/leasehold/semaphore"
	"github.com/leasehold/leasehold/session"
)

// Pause makes the server stop answering until Resume, as a redis-server
// stopped with SIGSTOP (or hung) does. Connections stay open and new ones are
// accepted, but no command runs and none is answered: each is held, and a
// script that was running stops at its next redis.call. Key TTLs keep
// counting down on the wall clock. Pause returns at once (a command already
// past its start runs to completion or to its next redis.call); it is
// idempotent.
//
// What a session sees: every call that needs Redis (Lock, TryLock, Release,
// Stats, ...) blocks until its ctx ends — a hang, not an error — and its
// heartbeats go unanswered. At the session's local deadline, the send time of
// its last confirmed heartbeat + TTL*0.99 - 5ms (at most about one TTL after
// Pause), every hold's context is canceled with a cause matching
// session.ErrLeaseLost, and the session ends with the same cause. That is at
// least TTL/100 + 5ms before its lease could expire on the server, so before
// anyone else could be granted what it held.
//
// While paused, Session, Manager and the reset helpers fail the test at once
// (a paused Redis answers nobody); RestartEmpty works, and ends the pause.
func (s *Server) Pause() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.g.set(true)
}

// Resume lets a paused server go on: the held commands run in the order they
// arrived, as a redis-server does after SIGCONT. Keys whose TTL ran out
// during the pause are gone. A session that ended during the pause stays
// ended (open a new one, or use a Manager); what it held is free once its
// lease is gone on the server: at once if the release it attempts on its way
// out (for one TTL after it ended) is among the held commands, else when the
// lease expires — which a heartbeat held by the pause, now run, may have
// pushed back by one TTL. Resume is a no-op if the server is not paused.
func (s *Server) Resume() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.g.set(false)
}

// notPaused fails the test if the server is paused: what needs answers.
func (s *Server) notPaused(t TB, what string) {
	t.Helper()
	s.mu.Lock()
	paused := s.g.isPaused()
	s.mu.Unlock()
	if paused {
		t.Fatalf("leaseholdtest: %s while the server is paused: a paused Redis answers nobody; Resume first", what)
	}
}

// RestartEmpty emulates a redis-server killed and restarted at once without
// persistence: every connection is closed, commands held by a Pause are
// dropped unanswered (the pause ends), and a new server with no keys and no
// loaded scripts listens on the same address. Its namespaces are not marked
// intact, so the whole restart grace applies, as after any data loss.
//
// What a session sees: its connections drop and rueidis reconnects (each
// dropped connection fails the first request sent on it with EOF, which the
// session retries after a short backoff); its next heartbeat, within about
// one Heartbeat interval, finds its lease gone, and reclaims its lease and
// every hold with its token: no hold ends, and session.Err stays nil.
// Nobody is granted anything for the namespace's restart grace (the
// RestartGrace of the session that noticed the loss first; the kit's
// sessions default it to their TTL) counted from when the loss was
// noticed: try-calls (TryLock, TryAcquire) fail with an error matching
// session.ErrRestartGrace at once (but a TryLock of a mutex its holder has
// reclaimed already fails with mutex.ErrLocked: it is held), blocking
// calls wait. The restart freed every resource at once: without the
// grace, others could be granted them before the old holders reclaimed
// them. This is why the grace exists, and why it cannot be turned off
// (session.Options.DisableRestartGrace is refused).
//
// After RestartEmpty, Session and Manager no longer mark namespaces intact:
// the sessions they open meet the grace as on a restarted Redis.
// RestartEmpty fails the test if the address cannot be bound again.
func (s *Server) RestartEmpty(t TB) {
	t.Helper()
	s.markMu.Lock()
	defer s.markMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		t.Fatalf("leaseholdtest: RestartEmpty after the server was closed")
	}
	s.g.close()
	s.m.Close()
	m, g, err := start(s.addr)
	if err != nil {
		t.Fatalf("leaseholdtest: restart on %s: %v", s.addr, err)
	}
	s.m, s.g, s.restarted = m, g, true
}

// ResetMutex force-releases mutex name in the server's namespace, as an
// operator's mutex.Reset (or `leasehold reset`) does, and hands it to the
// first live waiter. The holder's hold ends with a cause matching
// session.ErrLost but not session.ErrLeaseLost — at once when its session's
// notification connection is up, else at its next heartbeat (within one
// Heartbeat interval); the session and its other holds go on. ResetMutex
// returns once Redis has applied the reset, not once the holder has noticed:
// wait for the hold's Done.
//
// It fails the test if no live hold of the mutex was taken away (wrong name
// or namespace, or nothing held), or while the server is paused. It acts
// through a session of its own, opened and closed for the call.
func (s *Server) ResetMutex(t TB, name string) {
	t.Helper()
	s.operate(t, fmt.Sprintf("ResetMutex(%q)", name), func(ctx context.Context, op *session.Session) error {
		return wasHeld(mutex.New(op, name).Reset(ctx))
	})
}

// ResetElection forces the leader of election name in the server's namespace
// out, as an operator's election.Reset does, and elects the first live
// candidate. The leader's hold ends as a hold ends after ResetMutex
// (session.ErrLost, not session.ErrLeaseLost; its session goes on), and the
// same failures apply.
func (s *Server) ResetElection(t TB, name string) {
	t.Helper()
	s.operate(t, fmt.Sprintf("ResetElection(%q)", name), func(ctx context.Context, op *session.Session) error {
		return wasHeld(election.New(op, name).Reset(ctx))
	})
}

// ResetRWMutex force-releases read-write mutex name in the server's
// namespace, as an operator's rwmutex.Reset (or `leasehold reset`) does: its
// writer, or every one of its readers, and serves its queue (the next writer,
// or the readers at its head). Each hold taken away ends as a hold ends after
// ResetMutex (session.ErrLost, not session.ErrLeaseLost; its session goes
// on), and the same failures apply.
func (s *Server) ResetRWMutex(t TB, name string) {
	t.Helper()
	s.operate(t, fmt.Sprintf("ResetRWMutex(%q)", name), func(ctx context.Context, op *session.Session) error {
		n, err := rwmutex.New(op, name).Reset(ctx)
		return wasHeld(n > 0, err)
	})
}

// ResetSemaphore force-releases every permit held on semaphore name in the
// server's namespace, as an operator's semaphore.Reset (or `leasehold
// reset`) does, and serves its queue as a release would. Each hold taken
// away ends as a hold ends after ResetMutex (session.ErrLost, not
// session.ErrLeaseLost; its session goes on), and the same failures apply.
func (s *Server) ResetSemaphore(t TB, name string) {
	t.Helper()
	s.operate(t, fmt.Sprintf("ResetSemaphore(%q)", name), func(ctx context.Context, op *session.Session) error {
		n, err := semaphore.New(op, name, 1).Reset(ctx) // Reset ignores the limit
		return wasHeld(n > 0, err)
	})
}

// ResetPool force-releases every held member of pool name in the server's
// namespace, as an operator's pool.Reset (or `leasehold reset`) does: the
// members stay in the pool, free again, and its queue is served as after a
// release. Each hold taken away ends as a hold ends after ResetMutex
// (session.ErrLost, not session.ErrLeaseLost; its session goes on), and the
// same failures apply.
func (s *Server) ResetPool(t TB, name string) {
	t.Helper()
	s.operate(t, fmt.Sprintf("ResetPool(%q)", name), func(ctx context.Context, op *session.Session) error {
		n, err := pool.New(op, name).Reset(ctx)
		return wasHeld(n > 0, err)
	})
}

// RemovePoolMember removes member from pool name in the server's namespace,
// as an operator's pool.Remove does. If the member is held, that hold ends as
// a hold ends after ResetMutex (session.ErrLost, not session.ErrLeaseLost; its
// session goes on); the member is no longer granted. It fails the test if
// member is not in the pool (pool.ErrNotMember), or while the server is paused.
func (s *Server) RemovePoolMember(t TB, name, member string) {
	t.Helper()
	s.operate(t, fmt.Sprintf("RemovePoolMember(%q, %q)", name, member), func(ctx context.Context, op *session.Session) error {
		return pool.New(op, name).Remove(ctx, member)
	})
}

func wasHeld(taken bool, err error) error {
	if err == nil && !taken {
		return fmt.Errorf("no live hold to take away")
	}
	return err
}

// operate runs f with a session of the server's namespace, opened for the
// call, and fails the test with f's error. The session's restart grace is the
// longest of those the kit opened, so that if it is the first to see that
// Redis lost its data it does not cut their grace short.
func (s *Server) operate(t TB, what string, f func(ctx context.Context, op *session.Session) error) {
	t.Helper()
	s.notPaused(t, what)
	s.mu.Lock()
	grace := max(s.grace, DefaultTTL)
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), openTimeout)
	defer cancel()
	op, err := session.Dial(ctx, s.ClientOption(), session.Options{
		Namespace: s.ns, TTL: DefaultTTL, RestartGrace: grace, Owner: "leaseholdtest/operator",
	})
	if err != nil {
		t.Fatalf("leaseholdtest: %s: open the operator's session: %v", what, err)
	}
	defer op.Close()
	if err := f(ctx, op); err != nil {
		t.Fatalf("leaseholdtest: %s in namespace %q: %v", what, s.ns, err)
	}
}
