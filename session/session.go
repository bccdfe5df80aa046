package session

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/internal/lease"
)

// Session is one lease on a Redis namespace, renewed by one heartbeat
// goroutine. Everything created from it (mutex holds, ...) is valid only while
// its lease is, and every hold context is canceled before the lease can have
// expired on the server.
//
// A Session is safe for concurrent use. Once ended (Close, or lease lost) it
// stays ended; create a new one (or use a Manager) to continue.
type Session struct {
	l *lease.Session // immutable; the lease and its heartbeat goroutine; nil when sharded
	g *lease.Group   // immutable; the shards' lease copies when Options.Shards > 1, else nil
}

// Hold is something a session holds: a mutex, permits of a semaphore, a key
// of a pool, leadership of an election. Its context is canceled when the hold
// ends, and always before anyone else can be granted the same resource:
// on Release, on Close, when the hold is taken away (ErrLost) and when the
// session's lease can no longer be proven alive (ErrLeaseLost).
//
// An application must be ready for the hold to end at any moment: watch
// Context (or Done) and stop acting on the resource when it is canceled, and
// pass Token to anything that can reject stale writers.
//
// A Hold is safe for concurrent use.
type Hold struct {
	h lease.Hold // the hold itself, allocated with its public face
}

func init() {
	lease.Register(lease.Public{
		NewHold: func() (*lease.Hold, any) {
			p := new(Hold)
			return &p.h, p
		},
		Session: func(pub any) *lease.Session { return pub.(*Session).l },
		Group:   func(pub any) *lease.Group { return pub.(*Session).g },
		Hold:    func(pub any) *lease.Hold { return &pub.(*Hold).h },
	})
}

// Dial connects to Redis with opt and opens a session that owns the client:
// Close closes it. Unless set, opt.DisableCache is forced on (leasehold uses
// no client-side caching) and opt.ConnWriteTimeout is set to TTL/2 so that a
// stalled server is noticed within the lease. Unless o.Conn is set, the
// session also gets a connection of its own dialled with opt (see
// Options.Conn). ctx bounds only the creation of the session (the first
// lease grant), not its life.
func Dial(ctx context.Context, opt rueidis.ClientOption, o Options) (*Session, error) {
	if o.Shards > 1 {
		g, err := lease.DialGroup(ctx, opt, lease.Options(o))
		if err != nil {
			return nil, err
		}
		return &Session{g: g}, nil
	}
	l, err := lease.Dial(ctx, opt, lease.Options(o))
	if err != nil {
		return nil, err
	}
	return &Session{l: l}, nil
}

// New opens a session on a client the caller owns and keeps open until after
// Close. ctx bounds only the creation of the session (the first lease grant),
// not its life. Invalid options return an error matching ErrInvalidOptions
// and touch nothing in Redis.
//
// Set o.Conn to c's options to give the session a connection of its own,
// as Dial does: calls are faster with it (see Options.Conn).
//
// Build c as Dial builds its own client: with DisableCache set (leasehold
// uses no client-side caching, and with it on rueidis cannot connect to a
// server without RESP3 or CLIENT TRACKING), and with a ConnWriteTimeout
// below o.TTL (Dial uses TTL/2), so that a connection to a stalled server is
// given up and redialled within the lease rather than after rueidis' default
// of 10s. New cannot set them itself: rueidis fixes a client's options when
// rueidis.NewClient builds it, and a rueidis.Client neither reports nor
// changes them.
func New(ctx context.Context, c rueidis.Client, o Options) (*Session, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: New was given a nil client", ErrInvalidOptions)
	}
	if o.Shards > 1 {
		g, err := lease.NewGroup(ctx, c, lease.Options(o))
		if err != nil {
			return nil, err
		}
		return &Session{g: g}, nil
	}
	l, err := lease.New(ctx, c, lease.Options(o))
	if err != nil {
		return nil, err
	}
	return &Session{l: l}, nil
}

// ID returns the session id, unique per session; a new session gets a new id.
func (s *Session) ID() string {
	if s.g != nil {
		return s.g.ID()
	}
	return s.l.ID()
}

// Context returns a context canceled when the session ends. context.Cause
// tells why: ErrClosed, or an error matching ErrLeaseLost. A sharded
// session (Options.Shards) ends only on Close: the loss of one shard's
// lease copy ends that shard's holds, not the session.
func (s *Session) Context() context.Context {
	if s.g != nil {
		return s.g.Context()
	}
	return s.l.Context()
}

// Done returns a channel closed when the session ends.
func (s *Session) Done() <-chan struct{} {
	if s.g != nil {
		return s.g.Done()
	}
	return s.l.Done()
}

// Err returns nil while the session is alive, else why it ended. Like
// Hold.Err, it reports the loss as soon as the local deadline has passed.
//
// Err is set before any hold ends for the session's end: a goroutine woken
// by Hold.Done of a hold canceled because the session was lost or closed
// sees Err report that cause. Done and Context follow right after every
// such hold has ended.
func (s *Session) Err() error {
	if s == nil {
		return ErrNilSession // a primitive built on no session: its calls fail with this
	}
	if s.g != nil {
		return s.g.Err()
	}
	return s.l.Err()
}

// Deadline returns the local lease deadline: the instant until which the
// lease is proven alive by the last confirmed heartbeat. It moves forward with
// every confirmed heartbeat; when it passes, the session ends with
// ErrLeaseLost. For a sharded session it is the earliest deadline of its
// live lease copies, each of which ends its own shard's holds when it
// passes, and the zero time while it has none.
func (s *Session) Deadline() time.Time {
	if s.g != nil {
		return s.g.Deadline()
	}
	return s.l.Deadline()
}

// Close releases every hold (handing each to its next waiter), deletes the
// lease, cancels the contexts of the session and its holds with ErrClosed and
// waits for the session's goroutines to exit; a client opened by Dial is then
// closed. Close is bounded by the TTL: if Redis does not answer, the lease and
// holds expire on their own, and the cleanup requests still in flight end
// when the client gives up on them (soon for a client opened by Dial, whose
// Close finishes in the background if it would take Close past the TTL). It
// is idempotent; it returns an error only when the cleanup in Redis failed.
func (s *Session) Close() error {
	if s.g != nil {
		return s.g.Close()
	}
	return s.l.Close()
}

// Options returns the session's options with defaults filled in.
func (s *Session) Options() Options {
	if s.g != nil {
		return Options(s.g.Options())
	}
	return Options(s.l.Options())
}

// Client returns the client the session runs its calls on: the one given
// to New, or the one Dial built, which the session owns and closes with
// it. It is for what needs a client of the same Redis besides the
// session, such as fence.New; do not close it.
func (s *Session) Client() rueidis.Client {
	if s.g != nil {
		return s.g.Client()
	}
	return s.l.Client()
}

// Resource returns what is held: the mutex or election name, or the pool key
// that was claimed.
func (h *Hold) Resource() string { return h.h.Resource() }

// ID returns the hold id, unique across sessions: "<session id>.<n>".
// Inspection tools show it.
func (h *Hold) ID() string { return h.h.ID() }

// Token returns the fencing token of the grant: strictly increasing per
// resource across all holders.
func (h *Hold) Token() int64 { return h.h.Token() }

// Context returns a context canceled when the hold ends; context.Cause tells
// why (ErrReleased, ErrClosed, or an error matching ErrLost).
func (h *Hold) Context() context.Context { return h.h.Context() }

// Done returns a channel closed when the hold ends.
func (h *Hold) Done() <-chan struct{} { return h.h.Done() }

// Err returns nil while the hold is held, else why it ended. It reports the
// loss as soon as the session's local deadline has passed, even if the timer
// that cancels the context has not run yet (a loaded machine can delay it):
// check Err right before acting on the resource.
func (h *Hold) Err() error { return h.h.Err() }

// Release ends the hold: it cancels the hold's context, then frees the
// resource in Redis, handing it to the next waiter. ctx bounds the call.
//
// Release is idempotent: once it succeeded, later calls return nil. If the
// hold had ended before (taken away, or the lease lost), it returns an error
// matching ErrLost and changes nothing in Redis. If Redis could not be
// reached, it returns that error; the session keeps retrying the release in
// the background until it succeeds or the session ends, and calling Release
// again retries at once. A hold ended by Session.Close is released already.
func (h *Hold) Release(ctx context.Context) error { return h.h.Release(ctx) }

// CheckName returns an error matching ErrInvalidName unless name is a valid
// resource name: 1 to MaxNameLen bytes of valid UTF-8 without control
// characters (unicode.IsControl: U+0000-U+001F, U+007F-U+009F). Every
// primitive checks its names (and a pool its member keys) with it before
// sending anything to Redis. The error quotes the name (its first 64 runes)
// and says what is wrong:
//
//	session: invalid name "a\nb": control character at byte 1
func CheckName(name string) error { return lease.CheckName(name) }
