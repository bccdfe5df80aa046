package schedule

import "errors"

// ErrInvalid is matched by the error of New for a nil Manager, an invalid
// name (which also matches session.ErrInvalidName), a spec that does not
// parse, or invalid Options; of Run for a nil function; and of History for
// n <= 0. Nothing is sent to Redis.
var ErrInvalid = errors.New("schedule: invalid job")
