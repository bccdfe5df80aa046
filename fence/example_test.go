package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/mutex"
	"github.com/leasehold/leasehold/session"
)

// A holder that lost the mutex while it was paused writes too late: its
// token is lower than the one the next holder wrote with, and the store
// refuses it. The example runs on an in-process miniredis so that it is
// self-contained; point the client at a real Redis in production.
func ExampleStore_Set() {
	mr, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	ctx := context.Background()
	// ForceSingleClient and MarkIntact are for miniredis only (see the
	// mutex package's example).
	opt := rueidis.ClientOption{InitAddress: []string{mr.Addr()}, ForceSingleClient: true, DisableCache: true}
	client, err := rueidis.NewClient(opt)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	if err := leaseholdtest.MarkIntact(ctx, opt, ""); err != nil {
		log.Fatal(err)
	}
	s, err := session.New(ctx, client, session.Options{TTL: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	orders := fence.New(client, "orders")

	a, err := mutex.New(s, "order:42").Lock(ctx) // holder A
	if err != nil {
		log.Fatal(err)
	}
	// ... A pauses here past its TTL; the mutex goes to B. Releasing it
	// stands for that in this example.
	_ = a.Release(ctx)
	b, err := mutex.New(s, "order:42").Lock(ctx) // holder B, a higher token
	if err != nil {
		log.Fatal(err)
	}
	defer b.Release(ctx)
	fmt.Println("B writes:", orders.Set(ctx, "order:42", []byte("shipped"), b.Token()))

	err = orders.Set(ctx, "order:42", []byte("cancelled"), a.Token()) // A wakes up
	fmt.Println("A writes: stale:", errors.Is(err, fence.ErrStale))

	v, tok, err := orders.Get(ctx, "order:42")
	fmt.Println("value:", string(v), "written by B:", tok == b.Token(), err)
	// Output:
	// B writes: <nil>
	// A writes: stale: true
	// value: shipped written by B: true <nil>
}

// Guard fences a SQL transaction: here, an UPDATE of order 42 made by the
// holder of the mutex "order:42", whose token is token. The example needs a
// PostgreSQL database (db, opened with any database/sql driver, e.g. pgx's
// stdlib) and so is compiled but not run.
func ExampleGuard() {
	var db *sql.DB // e.g. sql.Open("pgx", "postgres://...")
	var token int64
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, fence.Schema); err != nil { // once, e.g. in a migration
		log.Fatal(err)
	}

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback()
	// First in the transaction: the reads below then see every write of an
	// older holder, and no newer holder's transaction can interleave.
	if err := fence.Guard(ctx, tx, "orders/42", token); errors.Is(err, fence.ErrStale) {
		log.Print("superseded by a newer holder: nothing written")
		return
	} else if err != nil {
		log.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "UPDATE orders SET status = 'shipped' WHERE id = 42"); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}
}
