package pool

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/leasehold/leasehold/internal/hook"
	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/session"
)

// Pool is a named pool in a session's namespace. It starts no goroutines and
// is safe for concurrent use.
type Pool struct {
	s    *session.Session
	name string
}

// New returns pool name of session s. Names and member keys follow
// session.CheckName (1 to session.MaxNameLen bytes of UTF-8 without control
// characters): an invalid name makes every method fail, and an invalid key
// the call it is passed to, with an error matching session.ErrInvalidName
// before anything is sent to Redis.
func New(s *session.Session, name string) *Pool { return &Pool{s: s, name: name} }

// Add adds members. New members are free and first in line; members already
// in the pool are left as they are. Waiters are served at once.
func (p *Pool) Add(ctx context.Context, keys ...string) error {
	return p.change(ctx, "add", keys)
}

// Remove removes members. If any key is not a member, nothing changes and
// the error matches ErrNotMember. A held member's hold ends with an error
// matching session.ErrLost.
func (p *Pool) Remove(ctx context.Context, keys ...string) error {
	return p.change(ctx, "remove", keys)
}

// Replace makes the pool's members exactly keys: members not in keys are
// removed as by Remove, new keys are added as by Add.
func (p *Pool) Replace(ctx context.Context, keys ...string) error {
	return p.change(ctx, "replace", keys)
}

func (p *Pool) change(ctx context.Context, op string, keys []string) error {
	if err := p.check(); err != nil {
		return err
	}
	if len(keys) == 0 {
		return fmt.Errorf("pool %q: %s: %w", p.name, op, ErrNoKeys)
	}
	for _, k := range keys {
		if err := session.CheckName(k); err != nil {
			return fmt.Errorf("pool %q: %s: %w", p.name, op, err) // err quotes the key
		}
	}
	if _, _, err := hook.Env(p.s, p.name).PoolChange(ctx, p.name, op, keys); err != nil {
		return fmt.Errorf("pool %q: %s: %w", p.name, op, hook.Refusal(scripts.Relabel(err, scripts.ErrNotMember, ErrNotMember)))
	}
	return nil
}

// Members returns the pool's members, sorted.
func (p *Pool) Members(ctx context.Context) ([]string, error) {
	st, err := p.Stats(ctx)
	if err != nil {
		return nil, err
	}
	return st.Members, nil
}

// Acquire claims any free member (the least recently released first),
// blocking until one is free, ctx ends, or the session ends. ctx bounds only
// the wait. Hold.Resource() is the claimed member. A Redis error that
// retrying cannot fix ends the wait at once (session.ErrRedisRefused).
func (p *Pool) Acquire(ctx context.Context) (*session.Hold, error) {
	return p.claim(ctx, "", true)
}

// TryAcquire claims any free member, or returns ErrExhausted at once; during
// a restart grace, when nothing is granted, it returns an error matching
// session.ErrRestartGrace instead.
func (p *Pool) TryAcquire(ctx context.Context) (*session.Hold, error) {
	h, err := p.claim(ctx, "", false)
	if errors.Is(err, scripts.ErrBusy) {
		return nil, ErrExhausted
	}
	return h, err
}

// AcquireKey claims member key, blocking until it is free, ctx ends, or the
// session ends. It fails with an error matching ErrNotMember if key is not a
// member, also when key is removed while waiting.
func (p *Pool) AcquireKey(ctx context.Context, key string) (*session.Hold, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	if err := session.CheckName(key); err != nil {
		return nil, fmt.Errorf("pool %q: key: %w", p.name, err) // err quotes the key
	}
	return p.claim(ctx, key, true)
}

func (p *Pool) claim(ctx context.Context, key string, wait bool) (*session.Hold, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	h, err := hook.Claim(ctx, p.s, scripts.Resource{Kind: scripts.Pool, Name: p.name, Key: key}, wait)
	if errors.Is(err, scripts.ErrNotMember) {
		return nil, fmt.Errorf("pool %q: %q: %w", p.name, key, ErrNotMember)
	}
	return h, err
}

// Holder is the holder of one member.
type Holder struct {
	Key     string
	Session string // holder session id
	Owner   string // holder session's Options.Owner
	Token   int64
}

// Stats describes a pool.
type Stats struct {
	Members []string // sorted
	Held    []Holder // sorted by key
	Free    int
	Waiters int // live requests waiting
}

// Stats reads the pool's state in one round trip. Members held by a session
// whose lease is gone count as free, unless that session's LockDelay keeps
// them (then they are listed as held, with no owner). Like every method, it fails with
// session.ErrClosed (or the cause of the lease loss) once the session ended.
func (p *Pool) Stats(ctx context.Context) (Stats, error) {
	if err := p.check(); err != nil {
		return Stats{}, err
	}
	st, err := hook.Env(p.s, p.name).PoolStats(ctx, p.name)
	if err != nil {
		return Stats{}, fmt.Errorf("pool %q: stats: %w", p.name, hook.Refusal(err))
	}
	out := Stats{Free: len(st.Free), Waiters: st.Waiters}
	out.Members = append(out.Members, st.Free...)
	for _, h := range st.Held {
		sid := scripts.SessionOf(h.HoldID)
		out.Held = append(out.Held, Holder{Key: h.Key, Session: sid, Owner: h.Owner, Token: h.Token})
		out.Members = append(out.Members, h.Key)
	}
	slices.Sort(out.Members)
	slices.SortFunc(out.Held, func(a, b Holder) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// Reset force-releases every held member of the pool, whoever holds it
// (an operator's override: no lock delay applies); the members stay in the
// pool and are free again, as after a release. The holds taken away end
// with an error matching session.ErrLost, at once when their session's
// notification connection is up, else at its next heartbeat; until then
// only fencing tokens protect the members. The queue is then served as
// after a release. It returns how many live holds were taken away.
func (p *Pool) Reset(ctx context.Context) (int, error) {
	if err := p.check(); err != nil {
		return 0, err
	}
	n, err := hook.Env(p.s, p.name).PoolReset(ctx, p.name)
	if err != nil {
		return 0, fmt.Errorf("pool %q: reset: %w", p.name, hook.Refusal(err))
	}
	return n, nil
}

func (p *Pool) check() error {
	if err := session.CheckName(p.name); err != nil {
		return fmt.Errorf("pool: %w", err) // err quotes the name
	}
	return p.s.Err()
}
