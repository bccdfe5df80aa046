package scripts

// ACLCommands are the Redis commands a session sends on a standalone Redis
// without ReplicaAck, itself or from its scripts (Redis checks the ACL of
// every call a script makes): with the namespace's keys ~{ns}:* and
// channels &{ns}:*, what a Redis ACL user needs to run every primitive.
// Redis Cluster also needs SPUBLISH and SSUBSCRIBE (sharded pub/sub) and the
// CLUSTER subcommands rueidis reads the topology with; ReplicaAck needs
// WAIT; Sentinel needs ROLE on the data nodes (rueidis checks the master's
// role). INFO is optional: the heartbeat reads the server's replication id
// with it (epoch_lib.lua repl_id), and a user without it gets no check of
// its holds after a failover without ReplicaAck.
// The scripts' test keeps this list in step with the *.lua files.
var ACLCommands = []string{
	// Sent by the session.
	"evalsha", "eval", "evalsha_ro", "eval_ro", "subscribe",
	// Called by the scripts.
	"time", "publish", "exists", "get", "set", "del", "pexpire", "persist", "pttl",
	"hget", "hset", "hsetnx", "hdel", "hmget", "hincrby", "hexists", "hkeys", "hgetall",
	"llen", "lpos", "rpush", "lpop", "lindex", "lrange", "lrem",
	"zadd", "zrange", "zrem", "zscore",
}
