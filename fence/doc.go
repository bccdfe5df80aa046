// Package fence makes the resource check the fencing token: a write carrying
// a token lower than one the resource has already seen is refused, so a
// holder that lost its hold without knowing it (paused by GC, SIGSTOP or a
// VM freeze past its TTL) cannot overwrite a newer holder's work.
//
//	h, err := mutex.New(s, "order:42").Lock(ctx)
//	...
//	st := fence.New(client, "orders")
//	v, _, err := st.GetFenced(ctx, "order:42", h.Token()) // read for a read-modify-write
//	...
//	err = st.Set(ctx, "order:42", next(v), h.Token())    // fence.ErrStale: a newer holder has been here
//
// A Store keeps keys in Redis. Set, SetTTL, Delete and GetFenced are one
// script call each, accepted only if the token is at least the highest token
// that has used the key; an accepted call makes its token that highest
// token (the key's mark). Get is a plain read. For a SQL database, Guard does
// the same inside the caller's transaction:
//
//	tx, err := db.BeginTx(ctx, nil)
//	...
//	if err := fence.Guard(ctx, tx, "orders/42", h.Token()); err != nil {
//		tx.Rollback() // errors.Is(err, fence.ErrStale): superseded
//		return err
//	}
//	// reads and writes of order 42, then tx.Commit()
//
// Tokens are the int64 values of session.Hold.Token: positive and strictly
// increasing per resource (mutex, election, pool member). Fence one key (or
// one SQL resource) with the tokens of one lock; tokens of different locks
// are not ordered with each other.
//
// # Why a fenced read
//
// Checking writes alone does not keep an update from being lost in a
// read-modify-write: A (token 10) reads 5 and pauses, B (token 11) reads 5,
// A wakes and writes 6 (accepted: no higher token has written), B writes 6
// (accepted): one increment is lost. GetFenced raises the mark on the read,
// so A's write after B's read is refused. Read with GetFenced whatever a
// write will be computed from.
//
// # The Redis layout
//
// A fenced key k of store n is two Redis keys under one hash tag, so that
// they share a Redis Cluster slot and a script can use both (different keys
// spread over the cluster): {fence:<len(n)>:n:k}:hi, the mark (a string,
// never expiring), and {fence:<len(n)>:n:k}:v, a hash of the value (field
// v) and the token that wrote it (field t). Tokens are compared as decimal
// strings, not as Lua numbers (doubles), so every int64 compares exactly.
//
// # Expiry and memory
//
// SetTTL gives the value a TTL; the mark does not expire, and neither does
// it go with Delete: a stale holder must find it whenever it wakes, or it
// could create the key again. So every key ever written leaves its mark
// behind: one Redis string holding an integer, on the order of a hundred
// bytes of Redis memory with a short key name (MEMORY USAGE reports the
// exact size), so a million keys written once keep on the order of 100 MB
// after their values have expired. Delete marks of keys that will
// never be used again yourself when no stale holder can be left (e.g. DEL
// {fence:...}:hi a day later), or use a store name per period.
//
// # Guard: fencing a SQL transaction
//
// Guard runs, in the caller's transaction,
//
//	INSERT INTO leasehold_fence (resource, token) VALUES ($1, $2)
//	ON CONFLICT (resource) DO UPDATE SET token = excluded.token
//	WHERE leasehold_fence.token <= excluded.token
//
// on the table of Schema, and returns ErrStale when no row was written. Why
// it works: the upsert locks the resource's row (a new row, through the
// primary key's unique index) until the transaction ends. A second guarded
// transaction on the same resource waits for that lock; when the first
// commits, PostgreSQL's default Read Committed re-evaluates the WHERE on the
// committed row. So a stale holder's transaction either waits until the
// newer one commits and then sees its higher token (ErrStale), or commits
// first, and then it was not stale when it did: the newer holder's Guard
// waits for it, and its later statements see what it committed. Call Guard
// first in the transaction: a read made before Guard can miss a write that
// an older holder, still guarding its transaction, has yet to commit.
//
// Repeatable Read and Serializable: a Guard that waited for a transaction
// that then committed a guard on the same resource fails with a
// serialization failure (SQLSTATE 40001) instead, whatever the tokens; retry
// the whole transaction, as at those levels anyway. Nothing stale commits.
//
// SQLite (3.24 and later) runs the same statement; a write transaction
// holds the database's single writer lock until it ends, which serialises
// guarded transactions as the row lock does (BEGIN IMMEDIATE, or the first
// write, takes it).
//
// MySQL (InnoDB) has no ON CONFLICT ... WHERE, and its rows-affected count
// cannot tell a stale token from an unchanged one (0 when the row keeps its
// value, 1 with CLIENT_FOUND_ROWS, whichever the reason). Guard does not
// support it; run instead, with the same table (resource VARCHAR(n) PRIMARY
// KEY, token BIGINT NOT NULL),
//
//	INSERT INTO leasehold_fence (resource, token) VALUES (?, ?)
//	  ON DUPLICATE KEY UPDATE token = IF(token <= VALUES(token), VALUES(token), token);
//	SELECT token FROM leasehold_fence WHERE resource = ? FOR UPDATE;
//
// and treat a token read back above yours as stale. The upsert takes an
// exclusive row lock until commit, which serialises guarded transactions
// as in PostgreSQL; the SELECT must be a locking read (FOR UPDATE), which
// reads the latest committed row, because under InnoDB's default
// REPEATABLE READ a plain SELECT reads the transaction's snapshot, which
// may predate the newer holder's commit. MySQL's REPEATABLE READ does not
// fail with a serialization error as PostgreSQL's does: the row lock alone
// orders the transactions.
//
// # Guarantees and limits
//
// A refused call changes nothing. An accepted one may have changed Redis even
// if ctx ended before the answer came. The mark lives in the same Redis as
// the value, and is only as durable: a Redis that loses acknowledged writes
// (a failover to a replica that missed them, a restart from an old snapshot)
// may lose a mark and accept a stale token again. Get checks nothing; a
// value read with it must not be written back with a token. Fencing
// protects the resource, not the work: a stale holder may still have done
// anything that does not go through the Store or a guarded transaction.
// A Store is safe for concurrent use and starts no goroutine.
package fence
