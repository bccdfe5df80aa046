// Command leasehold runs commands under locks, semaphores and leader election
// kept in Redis, shows what is held, and repairs it:
//
//	leasehold lock NAME -- CMD [ARGS...]           run CMD holding mutex NAME
//	leasehold sem NAME --limit N -- CMD [ARGS...]  run CMD holding semaphore permits
//	leasehold elect NAME -- CMD [ARGS...]          run CMD while leading election NAME
//	leasehold pool acquire NAME -- CMD [ARGS...]   run CMD holding a free member of pool NAME
//	leasehold status [--json]                      sessions, mutexes, semaphores, pools, elections
//	leasehold reset NAME|--all [--yes]             force-release what is held: mutexes, leaders, permits, members
//	leasehold sem-limit NAME [N] | --clear NAME    show or set a semaphore's limit for every user
//	leasehold pool add|rm|ls|stats NAME [KEYS...]  manage a key pool
//	leasehold demo [--redis URL]                   a scripted story on an embedded Redis
//
// lock, sem, elect and pool acquire start CMD in its own process group once
// the resource is granted, with LEASEHOLD_NAME, LEASEHOLD_KIND,
// LEASEHOLD_TOKEN (the fencing token), LEASEHOLD_SESSION and, for a pool,
// LEASEHOLD_MEMBER in its environment. If the hold is lost while
// CMD runs, CMD's process group gets SIGTERM at the session's local deadline,
// which is before anyone else can be granted the resource, then SIGKILL
// --kill-after later, and leasehold exits 75. While CMD runs, leasehold warns
// on stderr once the lease is at risk (no heartbeat confirmed for half the
// TTL) and says when Redis answers again. 'leasehold lock -h' explains
// the timing, the lock delay that keeps a SIGTERM-ignoring CMD from
// overlapping the next holder, and what only fencing tokens can cover.
//
// Run 'leasehold -h' for the flags, the Redis URL forms and the exit codes.
package main
