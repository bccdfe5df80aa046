package pgtest_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/leasehold/leasehold/internal/pgtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestStartQueryStop(t *testing.T) {
	s := pgtest.Start(t)
	db := s.Open(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var v string
	if err := db.QueryRowContext(ctx, "SHOW server_version").Scan(&v); err != nil {
		t.Fatalf("query: %v", err)
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT 1 + 1").Scan(&n); err != nil || n != 2 {
		t.Fatalf("SELECT 1 + 1 = %d, %v", n, err)
	}
	t.Logf("PostgreSQL %s at %s", v, s.DSN())
}
