// Package election elects one leader among the sessions campaigning for a
// name: one active scheduler among N replicas.
//
//	h, err := election.New(s, "scheduler").Campaign(ctx, "node-a:8080") // blocks until this session leads
//	if err != nil {
//		return err
//	}
//	defer h.Release(context.Background())   // resign: the next candidate leads at once
//	return schedule(h.Context(), h.Token()) // lead until h.Context() ends; the token is the term
//
// Campaign blocks until the caller leads and returns the leadership as a
// session.Hold; candidates are served FIFO, and a resigning (Release) or
// failing leader hands over to the next live candidate in the same script
// call. The term number is the hold's fencing token: strictly increasing
// across leaders, so a storage layer can reject writes of a deposed leader.
// Run does the same for the whole life of a process on a session.Manager,
// campaigning again after a loss; Leadership gives the code that leads its
// hold (its term). Reset forces a leader out (an operator action).
//
// # Observing
//
// Any session, candidate or not, can follow who leads with an Observer. Its
// channel C is closed when the observation ends, and Err then says why, as a
// context.Context's Err does once Done is closed:
//
//	o := election.New(s, "scheduler").Observer(ctx)
//	for l := range o.C() { // the current leader first, then every change
//		route(l.Value) // a zero Leader: nobody leads
//	}
//	return o.Err() // ctx's cause, session.ErrLeaseLost or ErrClosed, or ErrInvalidName
//
// Observe(ctx) is Observer(ctx).C(), for callers that need no reason. An
// Observer ends with its session; ManagerObserver follows a Manager's
// sessions instead, as Run does, for a process that observes for its whole
// life.
//
// # Guarantees and limits
//
// A leader's hold context is canceled before anyone else can be elected (see
// package session for the clock assumptions). A leader that stops
// heartbeating (crash, pause, partition) is replaced after its lease expires;
// the next candidate is elected when its fallback re-check runs, at about
// the old lease's expiry. An Observer delivers every change it sees, always
// the latest state, in term order; under rapid changes it may skip
// intermediate states, never deliver an older one after a newer one.
package election
