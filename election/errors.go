package election

import "errors"

var (
	// ErrNotLeader is returned by Proclaim when this Election does not lead.
	ErrNotLeader = errors.New("election: not the leader")
	// ErrNoLeader is returned by Leader when nobody leads.
	ErrNoLeader = errors.New("election: no leader")
	// ErrInvalidValue reports a value longer than MaxValueLen.
	ErrInvalidValue = errors.New("election: value too long")
)
