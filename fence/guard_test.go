package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/session"
)

// pgDB starts PostgreSQL and creates the fence table.
func pgDB(t *testing.T) *sql.DB {
	t.Helper()
	db := pgtest.Start(t).Open(t)
	if _, err := db.ExecContext(testutil.Ctx(t, 10*time.Second), fence.Schema); err != nil {
		t.Fatalf("Schema: %v", err)
	}
	return db
}

// guardTx begins a transaction at level and guards resource with token in it.
func guardTx(ctx context.Context, db *sql.DB, level sql.IsolationLevel, resource string, token int64) (*sql.Tx, error) {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: level})
	if err != nil {
		return nil, err
	}
	if err := fence.Guard(ctx, tx, resource, token); err != nil {
		_ = tx.Rollback()
		return nil, err
	}
	return tx, nil
}

func tokenOf(t *testing.T, db *sql.DB, resource string) int64 {
	t.Helper()
	var tok int64
	err := db.QueryRowContext(testutil.Ctx(t, 5*time.Second), "SELECT token FROM leasehold_fence WHERE resource = $1", resource).Scan(&tok)
	if errors.Is(err, sql.ErrNoRows) {
		return 0
	}
	if err != nil {
		t.Fatalf("read the guard row: %v", err)
	}
	return tok
}

// waitBlocked waits until a guard statement waits for a row lock.
func waitBlocked(t *testing.T, ctx context.Context, db *sql.DB) {
	t.Helper()
	testutil.WaitFor(t, ctx, func() bool { return guardWaiting(ctx, db) })
}

// guardWaiting reports whether a guard statement waits for a row lock.
func guardWaiting(ctx context.Context, db *sql.DB) bool {
	var n int
	err := db.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE wait_event_type = 'Lock' AND query LIKE 'INSERT INTO leasehold_fence%'`).Scan(&n)
	return err == nil && n > 0
}

func TestGuard(t *testing.T) {
	db := pgDB(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	commit := func(t *testing.T, tx *sql.Tx, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("guard: %v", err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatalf("commit: %v", err)
		}
	}

	t.Run("sequence", func(t *testing.T) {
		for _, s := range []struct {
			tok  int64
			want error
		}{{10, nil}, {10, nil}, {12, nil}, {11, fence.ErrStale}, {1, fence.ErrStale}, {13, nil}} {
			tx, err := guardTx(ctx, db, sql.LevelDefault, "seq", s.tok)
			if !errors.Is(err, s.want) {
				t.Fatalf("Guard(%d): got %v, want %v", s.tok, err, s.want)
			}
			if err == nil {
				commit(t, tx, nil)
			}
		}
		if got := tokenOf(t, db, "seq"); got != 13 {
			t.Fatalf("row token %d, want 13", got)
		}
	})

	t.Run("invalid input", func(t *testing.T) {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		for _, bad := range testutil.InvalidNames() {
			if err := fence.Guard(ctx, tx, bad, 1); !errors.Is(err, session.ErrInvalidName) {
				t.Errorf("Guard(%q): got %v, want ErrInvalidName", bad, err)
			}
		}
		for _, tok := range []int64{0, -5} {
			if err := fence.Guard(ctx, tx, "bad", tok); !errors.Is(err, fence.ErrInvalidToken) {
				t.Errorf("Guard with token %d: got %v, want ErrInvalidToken", tok, err)
			}
		}
		var n int
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM leasehold_fence WHERE resource <> 'seq'").Scan(&n); err != nil || n != 0 {
			t.Fatalf("rows written by invalid calls: %d, %v", n, err)
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Error("Guard with a nil tx did not panic")
				}
			}()
			_ = fence.Guard(ctx, nil, "r", 1)
		}()
	})

	// Read Committed, PostgreSQL's default: the second guard waits for the
	// first transaction's row lock, then re-evaluates its WHERE on the
	// committed row.
	for _, tc := range []struct {
		name          string
		first, second int64
		end           func(*sql.Tx) error
		want          error
		row           int64
	}{
		{"stale waits for newer, then is refused", 20, 10, (*sql.Tx).Commit, fence.ErrStale, 20},
		{"newer waits for stale, then passes", 10, 20, (*sql.Tx).Commit, nil, 20},
		{"stale passes once newer rolls back", 20, 10, (*sql.Tx).Rollback, nil, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := "rc/" + tc.name
			first, err := guardTx(ctx, db, sql.LevelDefault, res, tc.first)
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			var second *sql.Tx
			go func() {
				var err error
				second, err = guardTx(ctx, db, sql.LevelDefault, res, tc.second)
				done <- err
			}()
			waitBlocked(t, ctx, db)
			select {
			case err := <-done:
				t.Fatalf("second guard returned %v while the first transaction was open", err)
			default:
			}
			if err := tc.end(first); err != nil {
				t.Fatal(err)
			}
			if err := <-done; !errors.Is(err, tc.want) {
				t.Fatalf("second guard: got %v, want %v", err, tc.want)
			}
			if tc.want == nil {
				commit(t, second, nil)
			}
			if got := tokenOf(t, db, res); got != tc.row {
				t.Fatalf("row token %d, want %d", got, tc.row)
			}
		})
	}

	// Repeatable Read and Serializable: a guard that waited for a
	// transaction that then committed its own guard fails with a
	// serialization failure (SQLSTATE 40001), whichever token is higher;
	// the caller retries the transaction.
	for _, level := range []sql.IsolationLevel{sql.LevelRepeatableRead, sql.LevelSerializable} {
		for _, existing := range []bool{false, true} {
			t.Run(level.String()+map[bool]string{false: " new row", true: " existing row"}[existing], func(t *testing.T) {
				res := "iso/" + level.String() + map[bool]string{false: "/new", true: "/existing"}[existing]
				if existing {
					tx, err := guardTx(ctx, db, sql.LevelDefault, res, 1)
					commit(t, tx, err)
				}
				first, err := guardTx(ctx, db, sql.LevelDefault, res, 20)
				if err != nil {
					t.Fatal(err)
				}
				done := make(chan error, 1)
				go func() {
					tx, err := guardTx(ctx, db, level, res, 30)
					if err == nil {
						_ = tx.Rollback()
					}
					done <- err
				}()
				waitBlocked(t, ctx, db)
				if err := first.Commit(); err != nil {
					t.Fatal(err)
				}
				err = <-done
				var pe *pgconn.PgError
				if !errors.As(err, &pe) || pe.Code != "40001" {
					t.Fatalf("guard at %v after a concurrent commit: got %v, want SQLSTATE 40001", level, err)
				}
				if tx, err := guardTx(ctx, db, level, res, 30); err != nil { // the retry passes
					t.Fatalf("retry at %v: %v", level, err)
				} else {
					commit(t, tx, nil)
				}
			})
		}
	}
}
