// Package session provides leases on Redis and the holds that hang off them.
//
//	s, err := session.Dial(ctx, rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}},
//		session.Options{TTL: 10 * time.Second})
//	if err != nil {
//		return err
//	}
//	defer s.Close() // releases every hold and deletes the lease
//
//	h, err := mutex.New(s, "reindex").Lock(ctx) // a Hold: a context and a fencing token
//	...
//	<-h.Done()                        // released, closed, taken away, or the lease lost
//	why := context.Cause(h.Context()) // ErrReleased, ErrClosed, or an error matching ErrLost
//
// A Session is one lease with a TTL, renewed by a heartbeat every
// Options.Heartbeat. The mutexes, read-write mutex holds, semaphore permits,
// pool members and election leaderships a session takes (packages mutex,
// rwmutex, semaphore, pool, election) are Holds: each has a fencing token
// and a context that is canceled when the hold ends. However many holds a
// session has, it sends one request per heartbeat, and a hold is valid
// while its resource records it and its session's lease exists, so
// renewing the lease renews them all. That request costs Redis
// O(1 + revoked + keys), not O(holds): it also reports the holds taken
// away since the last one, and extends the expiry of the keys that are due
// for it, each hold's every few heartbeats and each wait's every time (see
// docs/protocol.md).
//
// The heartbeat runs on a helper goroutine of the session's loop
// goroutine, which owns the local deadline; the session also runs a
// goroutine that hands its log records to the Logger, helpers for pending
// releases and for the notification subscription while one is needed, and,
// while its calls overlap, the goroutines that send them together
// (docs/design.md, "The session actor", lists them all).
//
// # Guarantees and limits
//
// A hold's context is canceled before anyone else can be granted the same
// resource. The session keeps a local deadline on the monotonic clock,
//
//	send time of the last confirmed heartbeat + TTL*0.99 - 5ms
//
// and a timer cancels the session and every hold at that deadline unless a
// newer heartbeat was confirmed. The server starts the lease's TTL when it
// receives the heartbeat, which is after the client sent it, so the lease
// outlives the deadline. This holds as long as:
//
//   - the client's and the server's clocks run at rates within 1% of each
//     other, and the Redis host's wall clock is not stepped forward (Redis
//     keeps key expiry as an absolute time of its clock; a step the
//     heartbeat sees is logged); the client's wall clock does not matter;
//   - Redis does not lose the lease's last renewal or a grant behind the
//     session's back. A loss of all the namespace's data (a restart
//     without persistence, FLUSHALL, a replica promoted empty) is detected
//     (the epoch marker {ns}:epoch is gone): grants are refused for the
//     namespace's restart grace from when a session notices it, and
//     sessions still inside their deadline reclaim their lease and holds
//     with their old tokens (see Options.RestartGrace). On Sentinel and
//     Redis Cluster, ReplicaAck is what makes a failover safe: WAIT after
//     every grant and renewal, in the same round trip. Without it, a
//     failover to a replica that had not received the last writes can
//     grant a resource twice; the heartbeat notices the promotion (the
//     server's replication id changes), checks that Redis still records
//     every hold, and ends those it lost with ErrLost, about one heartbeat
//     after the client reaches the new master;
//   - the process is not paused between checking a context and acting on the
//     resource. No lock service can rule that out: pass Hold.Token to
//     whatever you write to, and let it reject tokens older than the newest
//     it has seen.
//
// A hold can end at any moment: when heartbeats cannot be confirmed in time
// (Redis down, slow or unreachable), when an operator resets it, when its
// pool member is removed, when the session is closed. Watch Hold.Context or
// Hold.Done and stop using the resource when it ends; context.Cause tells
// why (ErrReleased, ErrClosed, or an error matching ErrLost; ErrLeaseLost
// when the whole session was lost).
//
// When a session ends (lost or closed), its Err reports why before any of
// its holds ends: a goroutine woken by Hold.Done finds Session.Err already
// set. The session's own Done and Context follow once every hold has ended.
//
// A session that lost its lease stays ended: Err reports why, and a new
// session (new id, new lease) is needed. Holds taken away from a live session
// end alone, with ErrLost, when the next heartbeat reports them (at once when
// the session has a notification connection open).
//
// Every key a hold uses expires, so that a process that crashed leaves
// nothing in Redis: its keys go at most 2 x TTL + LockDelay after its
// lease. The heartbeat keeps a hold's keys alive (each every few
// heartbeats, in the same round trip), and a hold whose keys it could not
// keep before they could expire (deleted by hand, or a Redis Cluster slot
// migration that outlasts about two TTLs) ends alone with ErrLost.
//
// Every Redis call a session makes is bounded: by the caller's context, by
// the local deadline, and by the session's end. Close releases every hold in
// Redis (handing each to its next waiter), deletes the lease and waits for
// the session's goroutines (for those waiting on a silent server or a slow
// log handler, at most until one TTL after Close began).
//
// # Clients
//
// Dial builds the session's own rueidis client and sets two of its options:
// DisableCache, since leasehold uses no client-side caching (with it on,
// rueidis also sends CLIENT TRACKING on every connection, and cannot connect
// to a server without RESP3 or tracking), and, unless set, ConnWriteTimeout
// to TTL/2, so that a connection to a stalled or vanished server is given up
// and redialled within the lease rather than after rueidis' default of 10s.
// New and NewManager take a client the caller built and cannot set them:
// rueidis fixes a client's options in rueidis.NewClient, and a
// rueidis.Client neither reports nor changes them. Build that client with
// DisableCache: true and a ConnWriteTimeout below the TTL (TTL/2, as Dial
// does).
//
// # Names
//
// The names of mutexes, semaphores, pools and elections, and a pool's member
// keys, are 1 to MaxNameLen bytes of valid UTF-8 without control characters.
// Every call given another name returns an error matching ErrInvalidName
// that says what is wrong, before anything is sent to Redis; CheckName
// applies the same rule, e.g. to user input.
package session
