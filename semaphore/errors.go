package semaphore

import "errors"

var (
	// ErrNoPermits is returned by TryAcquire when the permits are not free now.
	ErrNoPermits = errors.New("semaphore: not enough free permits")
	// ErrLimitMismatch reports that Redis stores another limit for the
	// semaphore than this client's; nothing was changed.
	ErrLimitMismatch = errors.New("semaphore: limit differs from the one stored in Redis")
	// ErrInvalidLimit reports a limit <= 0.
	ErrInvalidLimit = errors.New("semaphore: limit must be > 0")
	// ErrInvalidWeight reports n <= 0 or n > limit.
	ErrInvalidWeight = errors.New("semaphore: weight must be > 0 and <= limit")
)
