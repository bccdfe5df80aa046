package mutex

import "errors"

// ErrLocked is returned by TryLock when another hold has the mutex.
var ErrLocked = errors.New("mutex: locked by another hold")
