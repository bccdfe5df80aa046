package election

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/leasehold/leasehold/internal/hook"
	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/session"
)

// MaxValueLen is the longest leader value accepted, in bytes.
const MaxValueLen = 64 << 10

// Leader is the leader of an election.
type Leader struct {
	Value   string // set by Campaign or Proclaim
	Session string // leader session id; "" in Observe's "nobody leads"
	Token   int64  // term number
}

// Election is a named election in a session's namespace. It is safe for
// concurrent use; only Observe starts a goroutine, owned by the session.
type Election struct {
	s    *session.Session
	name string

	mu   sync.Mutex
	hold *session.Hold // the leadership won by the last Campaign
}

// New returns election name of session s. An invalid name makes every method
// fail with an error matching session.ErrInvalidName.
func New(s *session.Session, name string) *Election { return &Election{s: s, name: name} }

// Campaign blocks until the caller is the leader, ctx ends, or the session
// ends, and returns the leadership. ctx bounds only the wait: leadership
// lasts until Hold.Release (resign) or loss. value is the leader's value
// while it leads.
//
// On failure nothing is held, and the error is ctx's cause, the session's
// end (an error matching session.ErrClosed or session.ErrLeaseLost),
// invalid input, or a Redis error that retrying cannot fix (a missing ACL
// permission, a read-only replica: session.ErrRedisRefused). Other Redis
// errors (a dropped connection, a restarting server) do not end the
// campaign: the session retries it with a growing pause, keeping its place
// in the queue, for as long as ctx and the session last.
func (e *Election) Campaign(ctx context.Context, value string) (*session.Hold, error) {
	if err := e.check(value); err != nil {
		return nil, err
	}
	h, err := hook.Claim(ctx, e.s, scripts.Resource{Kind: scripts.Election, Name: e.name, Value: value}, true)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.hold = h
	e.mu.Unlock()
	return h, nil
}

// Proclaim changes the leader's value without an election. It fails with
// ErrNotLeader unless this Election's last Campaign leads.
func (e *Election) Proclaim(ctx context.Context, value string) error {
	if err := e.check(value); err != nil {
		return err
	}
	e.mu.Lock()
	h := e.hold
	e.mu.Unlock()
	if h == nil || h.Err() != nil {
		return fmt.Errorf("election %q: %w", e.name, ErrNotLeader)
	}
	// Recorded first: once Redis may hold the new value, a reclaim after an
	// empty restart must recreate it. If the call fails, the outcome is
	// unknown and either value may be the one Redis had.
	hook.Unwrap(h).SetValue(scripts.Value(value))
	ok, err := hook.Env(e.s, e.name).ElectionProclaim(ctx, e.name, h.ID(), value)
	if err != nil {
		return fmt.Errorf("election %q: proclaim: %w", e.name, hook.Refusal(err))
	}
	if !ok {
		return fmt.Errorf("election %q: %w", e.name, ErrNotLeader)
	}
	return nil
}

// Reset forces the current leader out (an operator action) and elects the
// first live candidate. The old leader's hold ends with an error matching
// session.ErrLost: at once when its session's notification connection is
// up, else within one heartbeat interval — only fencing by term protects
// against the old leader in that window. It reports whether a live leader
// was removed.
func (e *Election) Reset(ctx context.Context) (bool, error) {
	if err := e.check(""); err != nil {
		return false, err
	}
	hid, err := hook.Env(e.s, e.name).ElectionReset(ctx, e.name)
	if err != nil {
		return false, fmt.Errorf("election %q: reset: %w", e.name, hook.Refusal(err))
	}
	return hid != "", nil
}

// Leader returns the current leader, or ErrNoLeader.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	if err := e.check(""); err != nil {
		return Leader{}, err
	}
	l, _, err := e.read(ctx)
	if err != nil {
		return Leader{}, err
	}
	if l.Session == "" {
		return Leader{}, fmt.Errorf("election %q: %w", e.name, ErrNoLeader)
	}
	return l, nil
}

func (e *Election) read(ctx context.Context) (Leader, time.Duration, error) {
	st, err := hook.Env(e.s, e.name).ElectionLeader(ctx, e.name)
	if err != nil {
		return Leader{}, 0, fmt.Errorf("election %q: leader: %w", e.name, hook.Refusal(err))
	}
	if st.HoldID == "" {
		return Leader{}, 0, nil
	}
	sid := scripts.SessionOf(st.HoldID)
	return Leader{Value: st.Value, Session: sid, Token: st.Term}, st.TTL, nil
}

func (e *Election) check(value string) error {
	if err := session.CheckName(e.name); err != nil {
		return fmt.Errorf("election: %w", err) // err quotes the name
	}
	if len(value) > MaxValueLen {
		return fmt.Errorf("election %q: %w", e.name, ErrInvalidValue)
	}
	return e.s.Err()
}
