package session

import (
	"errors"

	"github.com/leasehold/leasehold/internal/lease"
)

// The session's errors are declared once, by the machinery that returns
// them (internal/lease), and named here, as os.ErrNotExist is fs.ErrNotExist.
var (
	// ErrClosed is returned by calls on a closed session, and is the cause of
	// every hold context that Close ended.
	ErrClosed = lease.ErrClosed

	// ErrLost is the cause of a hold that ended without Release: it was taken
	// away (Reset, pool member removed) or its session's lease was lost.
	ErrLost = lease.ErrLost

	// ErrLeaseLost is the cause of everything a session held when its lease
	// could no longer be proven alive. errors.Is(ErrLeaseLost, ErrLost) is true.
	ErrLeaseLost = lease.ErrLeaseLost

	// ErrReleased is the cause of a hold context ended by Hold.Release.
	ErrReleased = lease.ErrReleased

	// ErrInvalidOptions reports an invalid Options value.
	ErrInvalidOptions = lease.ErrInvalidOptions

	// ErrInvalidName reports an empty or oversized resource name.
	ErrInvalidName = lease.ErrInvalidName

	// ErrNotReplicated reports that fewer replicas than Options.ReplicaAck
	// acknowledged a grant in time; the grant was rolled back.
	ErrNotReplicated = lease.ErrNotReplicated

	// ErrManagerClosed is returned by a Manager's methods after Close.
	ErrManagerClosed = errors.New("session: manager closed")
)
