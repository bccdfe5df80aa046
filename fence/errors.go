package fence

import "errors"

var (
	// ErrStale is returned by Set, SetTTL, GetFenced, Delete and Guard when
	// a newer token (a higher one) has already used the key or resource:
	// the caller's hold has been superseded. Nothing was changed.
	ErrStale = errors.New("fence: a newer token has used the key")

	// ErrNotFound is returned by Get and GetFenced when the key has no value:
	// never set, deleted, or expired.
	ErrNotFound = errors.New("fence: key not found")

	// ErrInvalidToken reports a token <= 0; tokens are Hold.Token() values,
	// which are always positive.
	ErrInvalidToken = errors.New("fence: invalid token")

	// ErrInvalidTTL reports a SetTTL ttl shorter than a millisecond.
	ErrInvalidTTL = errors.New("fence: invalid TTL")
)
