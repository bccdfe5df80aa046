package flight

import "errors"

var (
	// ErrInvalidOptions is returned by every call of a Group whose Options
	// are invalid (a negative duration or one above session.MaxDuration, a
	// negative MaxValue, a Metrics registry that refuses the collectors).
	ErrInvalidOptions = errors.New("flight: invalid options")

	// ErrNilFunc is returned by Do when fn is nil.
	ErrNilFunc = errors.New("flight: nil function")

	// ErrValueTooLarge is returned by Do when fn returns a value longer than
	// Options.MaxValue. The value is not stored.
	ErrValueTooLarge = errors.New("flight: value larger than MaxValue")

	// ErrFailed wraps the error of a computation that failed: the caller that
	// ran fn gets fn's error wrapped in it (errors.Is matches both), callers
	// in other processes get ErrFailed with fn's error message (its first
	// MaxValue bytes).
	ErrFailed = errors.New("flight: computation failed")

	// ErrDiscarded is returned by the caller that ran fn when it lost the
	// right to compute before its outcome was stored: its session's lease
	// was lost (the error then also matches session.ErrLeaseLost), or its
	// hold was taken away (session.ErrLost). The outcome is discarded;
	// another caller may be computing already.
	ErrDiscarded = errors.New("flight: outcome discarded: the right to compute was lost")
)
