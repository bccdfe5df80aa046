package pool

import "errors"

var (
	// ErrExhausted is returned by TryAcquire when no member is free.
	ErrExhausted = errors.New("pool: no free member")
	// ErrNotMember reports a key that is not a member of the pool.
	ErrNotMember = errors.New("pool: not a member")
	// ErrNoKeys reports an empty key list.
	ErrNoKeys = errors.New("pool: no keys given")
)
