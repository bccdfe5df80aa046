package rwmutex

import "errors"

// ErrLocked is returned by TryLock when another hold has the mutex (shared
// or exclusive) or someone waits for it, and by TryRLock when a writer holds
// it or waits for it.
var ErrLocked = errors.New("rwmutex: locked by another hold")
