package fence

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/leasehold/leasehold/session"
)

// Schema creates the table Guard writes to, on PostgreSQL and SQLite; run
// it once, e.g. in a migration. It is safe to run again.
const Schema = `CREATE TABLE IF NOT EXISTS leasehold_fence (
	resource text PRIMARY KEY,
	token bigint NOT NULL
)`

// guardSQL raises the resource's row to the token unless the row holds a
// higher one; its row lock lasts until the transaction ends.
const guardSQL = `INSERT INTO leasehold_fence (resource, token) VALUES ($1, $2)
ON CONFLICT (resource) DO UPDATE SET token = excluded.token
WHERE leasehold_fence.token <= excluded.token`

// Guard records token as the newest that has used resource in the SQL
// transaction tx, or returns an error matching ErrStale when a higher token
// has (tx is then unchanged by Guard; roll it back). Call it first in the
// transaction, before every read that the transaction's writes depend on:
// the row it writes stays locked until tx commits or rolls back, so that a
// guarded transaction of another holder on the same resource waits for tx,
// and then sees tx's token and its writes.
//
// Guard runs one statement, an INSERT ... ON CONFLICT DO UPDATE ... WHERE
// on the table of Schema, with PostgreSQL's $1 placeholders (SQLite accepts
// them too); the package documentation says why it works, what isolation
// levels do, and what to run on MySQL instead. ctx bounds the statement,
// which may wait for another transaction's row lock. A resource is checked
// with session.CheckName, a token must be > 0 (ErrInvalidToken); Guard
// panics if tx is nil. Any other error is the driver's, wrapped.
func Guard(ctx context.Context, tx *sql.Tx, resource string, token int64) error {
	if tx == nil {
		panic("fence: Guard with a nil *sql.Tx")
	}
	if err := session.CheckName(resource); err != nil {
		return fmt.Errorf("fence: resource: %w", err)
	}
	if err := checkToken(token); err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, guardSQL, resource, token)
	if err != nil {
		return fmt.Errorf("fence: guard %q: %w", resource, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("fence: guard %q: rows affected: %w", resource, err)
	}
	if n == 0 {
		return fmt.Errorf("%w: guard %q with token %d", ErrStale, resource, token)
	}
	return nil
}
