package semaphore

import "errors"

var (
	// ErrNoPermits is returned by TryAcquire when the permits are not free now.
	ErrNoPermits = errors.New("semaphore: not enough free permits")
	// ErrLimitMismatch reports that Redis stores another limit for the
	// semaphore than this client's; nothing was changed.
	ErrLimitMismatch = errors.New("semaphore: limit differs from the one stored in Redis")
	// ErrInvalidLimit reports a limit <= 0 or above MaxLimit.
	ErrInvalidLimit = errors.New("semaphore: limit must be > 0 and <= 2^46")
	// ErrInvalidWeight reports n <= 0 or n > limit.
	ErrInvalidWeight = errors.New("semaphore: weight must be > 0 and <= limit")
)

// MaxLimit is the largest limit, 2^46 (about 7e13): permits are counted
// in Redis' scripts, whose numbers are doubles, exact up to 2^53, and a
// grant adds the permits asked for to those in use (each at most the
// limit); Lua writes a number into a string with 14 significant digits,
// exact below 1e14, which a holder's permits must stay under. Above it a
// grant could overshoot the limit by rounding, or record permits that no
// release could give back, so the methods that take the limit refuse it
// (ErrInvalidLimit).
const MaxLimit = 1 << 46
