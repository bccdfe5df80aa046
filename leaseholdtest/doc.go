// Package leaseholdtest gives unit tests an in-process Redis and sessions on
// it, with faults that make a hold's loss happen on demand:
//
//	func TestWorkerStopsWhenLockLost(t *testing.T) {
//		srv := leaseholdtest.New(t)                 // in-process Redis, stopped at the end of t
//		s := srv.Session(t, session.Options{})      // TTL 1s; closed at the end of t
//		h, err := mutex.New(s, "reindex").Lock(ctx)
//		...
//		srv.Pause()                                 // Redis stops answering
//		select {
//		case <-h.Done():                            // within about one TTL
//		case <-time.After(2 * time.Second):
//			t.Fatal("hold outlived its lease")
//		}
//		// errors.Is(context.Cause(h.Context()), session.ErrLeaseLost)
//	}
//
// The server is miniredis (github.com/alicebob/miniredis/v2), which runs
// leasehold's scripts as Redis does, listening on a loopback port. Its key
// TTLs count down on the wall clock, as Redis's do, so leases expire on the
// server as they would in production.
//
// # Sessions
//
// Server.Session opens a session on its own client, as a process of its own
// would; Server.Manager returns a session.Manager; Server.Client,
// Server.ClientOption and Server.Addr serve a user's own clients and sessions
// (session.New, session.Dial). Sessions default to a TTL of DefaultTTL (1s)
// instead of 10s, so that a loss is noticed within about a second.
//
// The restart grace stays on, as in production, but does not delay the
// first grant: the kit marks each namespace as holding all its data before
// its first session (MarkIntact, see Server.Session), as a namespace in use
// is. Only after Server.RestartEmpty do grants wait, as they would after a
// real data loss. A session of your own on the server (session.Dial with
// Server.ClientOption) needs no mark in the server's namespace, which New
// marks; in another namespace, call MarkIntact first. Give it the
// RestartGrace of the kit's sessions (their TTL): the sessions of a
// namespace share one grace, which the first of them records.
//
// # Faults
//
// Each fault makes a hold end, or deliberately not end, as the same event on
// a real redis-server would; the kit's own tests run every fault against a
// real redis-server too and check that the outcome is the same.
//
//	fault                what the session's holds see
//	Pause                canceled with ErrLeaseLost at the session's local deadline
//	                     (about one TTL), before the lease expires on the server
//	RestartEmpty         nothing: the session reclaims its lease and holds;
//	                     grants wait out the restart grace
//	ResetMutex,          that hold alone ends with ErrLost (not ErrLeaseLost), at once
//	ResetElection,       or within one Heartbeat interval; the session goes on
//	ResetRWMutex,        (ResetRWMutex: the writer's hold, or every reader's;
//	ResetSemaphore,      ResetSemaphore and ResetPool: every hold of the
//	ResetPool,           semaphore or pool)
//	RemovePoolMember
//
// Pause emulates a hung or SIGSTOPped redis-server: nothing is answered and
// nothing fails. It is not an outage: miniredis's SetError answers every
// command with an error at once, and a connection reset would make rueidis
// reconnect, while a paused Redis accepts connections and requests and
// answers none, so every call blocks until its context ends — the case a
// lease has to survive or lose safely. The kit holds each command before
// miniredis runs it (a pre-command hook waits while paused), rather than
// stalling a TCP proxy in front of the server: the effect on the network is
// the same (connections open, bytes accepted, no reply), and the hook also
// stops a script at its next redis.call and, on Resume, runs every held
// command in order, as Redis does after SIGCONT — also those of a connection
// the client closed meanwhile, which a stalled proxy would have to drop or
// replay on a connection of its own. A proxy would also add a hop and
// goroutines to every test.
//
// # Guarantees and limits
//
// What a fault does to a session (which error, before or after the
// server-side expiry, which holds survive) is what the same fault does on a
// real redis-server, for the faults above; TestFaultsMatchRealRedis checks
// each. Timing follows the same rules (the session's deadline, heartbeat
// interval and restart grace), but absolute times differ by a few
// milliseconds: test against the bounds the session package documents, not
// exact instants.
//
// miniredis is not Redis, and these are not emulated:
//
//   - Redis Cluster: no MOVED/ASK, no slot migration or failover; miniredis
//     answers CLUSTER commands as a one-node cluster, which is why clients use
//     ForceSingleClient.
//   - Replication: miniredis has no replicas, so WAIT never counts one and a
//     session with Options.ReplicaAck > 0 cannot work. Test replication and
//     failover against real Redis.
//   - Sharded pub/sub (SPUBLISH/SSUBSCRIBE): leasehold uses plain pub/sub
//     outside Redis Cluster, so nothing here needs it.
//   - Lua: scripts run in gopher-lua (Lua 5.1, like Redis), but without
//     Redis's script timeout (BUSY), and with miniredis's own error texts;
//     leasehold's scripts are tested on both.
//   - Persistence: RestartEmpty is the only restart; there is no AOF or RDB,
//     so a restart that keeps the data cannot be tested here.
//   - INFO replication: not reported, so a session on the kit's server
//     does not check its holds after a change of the replication id (there
//     is no failover to test here anyway).
//   - ACLs, memory limits and eviction, CLIENT PAUSE, DEBUG SLEEP.
//   - Network faults other than a whole-server Pause and RestartEmpty: no
//     latency, no partition of a single client, no connection resets.
//   - Clock faults: client and server share one clock, so the 1% clock-rate
//     bound of the session package always holds here.
//   - testing/synctest: the server listens on a real socket, so it cannot run
//     inside a synctest bubble.
//
// A Server is meant for one test (and its subtests); its methods are safe for
// concurrent use.
package leaseholdtest
