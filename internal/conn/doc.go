// Package conn makes a Redis call return when its ctx ends, which rueidis
// alone does not promise: Bound hands a call to another goroutine and
// returns at ctx's end; Lane, a session's connection of its own, runs a
// call on the caller's goroutine and interrupts it at ctx's end; Until and
// Direct spare the hand-over where rueidis honours the ctx by itself.
// NewClient bounds the dial of a client by a ctx too.
//
// It knows nothing of leasehold's protocol (internal/scripts) or of
// sessions (internal/lease).
package conn
