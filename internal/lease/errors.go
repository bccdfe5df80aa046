package lease

import (
	"errors"

	"github.com/leasehold/leasehold/internal/scripts"
)

var (
	// ErrClosed is returned by calls on a closed session, and is the cause of
	// every hold context that Close ended.
	ErrClosed = errors.New("session: closed")

	// ErrLost is the cause of a hold that ended without Release: it was taken
	// away (Reset, pool member removed) or its session's lease was lost.
	ErrLost = errors.New("session: hold lost")

	// ErrLeaseLost is the cause of everything a session held when its lease
	// could no longer be proven alive. errors.Is(ErrLeaseLost, ErrLost) is true.
	ErrLeaseLost error = leaseLost{}

	// ErrReleased is the cause of a hold context ended by Hold.Release.
	ErrReleased = errors.New("session: hold released")

	// ErrInvalidOptions reports an invalid Options value.
	ErrInvalidOptions = errors.New("session: invalid options")

	// ErrInvalidName reports an empty or oversized resource name.
	ErrInvalidName = errors.New("session: invalid name")

	// ErrNotReplicated reports that fewer replicas than Options.ReplicaAck
	// acknowledged a grant in time; the grant was rolled back.
	ErrNotReplicated = errors.New("session: not acknowledged by enough replicas")
)

// relabel relabels the internal ErrNotReplicated as the session's own.
func relabel(err error) error {
	return scripts.Relabel(err, scripts.ErrNotReplicated, ErrNotReplicated)
}

type leaseLost struct{}

func (leaseLost) Error() string { return "session: lease lost" }

// Is makes ErrLeaseLost match ErrLost.
func (leaseLost) Is(target error) bool { return target == ErrLost }
