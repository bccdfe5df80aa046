package lease

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leasehold/leasehold/internal/clock"
	"github.com/leasehold/leasehold/internal/scripts"
)

// keyBeats counts the heartbeats of s that asked to keep key alive.
func (r *rig) keyBeats(s *Session, key string) int {
	n := 0
	for _, b := range r.beats(s) {
		if slices.Contains(b.cmd, key) {
			n++
		}
	}
	return n
}

// TestTimingHeldKeysKept: a mutex held for 30 s (30 TTLs) keeps a key
// that expires (PTTL > 0 on the server, whose TTLs follow the virtual
// clock) and never goes, its holder's heartbeats keeping it; they carry the
// key only every few heartbeats, not every one.
func TestTimingHeldKeysKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = time.Second
		r := newRig(t, ttl)
		s := r.open(Options{TTL: ttl})
		h := claimX(t, s)
		key := s.env.K.Mutex("x")
		start := time.Now()
		for time.Since(start) < 30*time.Second {
			time.Sleep(10 * time.Millisecond)
			synctest.Wait()
			if err := h.Err(); err != nil {
				t.Fatalf("hold ended at +%v: %v", time.Since(start), err)
			}
			if d := r.m.TTL(key); d <= 0 || d > 3*ttl {
				t.Fatalf("at +%v: mutex key TTL %v, want within (0, 3 x TTL]", time.Since(start), d)
			}
		}
		beats, kept := len(r.beats(s)), r.keyBeats(s, key)
		t.Logf("%d heartbeats, %d of them kept the key", beats, kept)
		if kept < 30/3 || kept > beats/3 {
			t.Errorf("%d of %d heartbeats kept the key, want at least one per 3 TTLs and at most a third", kept, beats)
		}
		if err := h.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		if d := r.m.TTL(key); d <= 0 || d > 2*ttl {
			t.Errorf("released mutex key TTL %v, want the idle time, within (0, 2 x TTL]", d)
		}
	})
}

// TestTimingHoldEndsWhenKeysNotKept: a hold whose key the heartbeat cannot
// keep (here: deleted behind its back) ends alone with ErrLost exactly when
// the key could have expired (the grant's send time + 2 x TTL, less the
// drift and margin of every deadline), while its session lives on.
func TestTimingHoldEndsWhenKeysNotKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = time.Second
		r := newRig(t, ttl)
		s := r.open(Options{TTL: ttl})
		start := time.Now()
		h := claimX(t, s)
		r.m.Del(s.env.K.Mutex("x"))
		<-h.Done()
		if want := clock.Deadline(start, 2*ttl); !time.Now().Equal(want) {
			t.Errorf("hold ended at +%v, want +%v", time.Since(start), want.Sub(start))
		}
		if err := context.Cause(h.Context()); !errors.Is(err, ErrLost) || errors.Is(err, ErrLeaseLost) {
			t.Errorf("cause %v, want ErrLost, not ErrLeaseLost", err)
		}
		if err := s.Err(); err != nil {
			t.Errorf("session ended too: %v", err)
		}
	})
}

// TestTimingLongWaitThenHandOff: a waiter that waited 10 TTLs and is
// handed the mutex holds it as long as it likes: the heartbeats that kept
// the wait's keys alive date its keys, not the wait's start.
func TestTimingLongWaitThenHandOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = time.Second
		r := newRig(t, ttl)
		s1, s2 := r.open(Options{TTL: ttl}), r.open(Options{TTL: ttl})
		h1 := claimX(t, s1)
		got := make(chan *Hold, 1)
		go func() {
			h, err := s2.Claim(context.Background(), scripts.Resource{Kind: scripts.Mutex, Name: "x"}, true)
			if err != nil {
				t.Errorf("waiting Claim: %v", err)
			}
			got <- h
		}()
		time.Sleep(10 * ttl)
		synctest.Wait()
		if err := h1.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		h2 := <-got
		if h2 == nil {
			return
		}
		if !h2.keysUntil().After(s2.Deadline()) {
			t.Errorf("handed-over hold's keys kept until %v after its session's deadline; want later",
				s2.Deadline().Sub(h2.keysUntil()))
		}
		start := time.Now()
		for time.Since(start) < 10*ttl {
			time.Sleep(10 * time.Millisecond)
			synctest.Wait()
			if err := h2.Err(); err != nil {
				t.Fatalf("handed-over hold ended at +%v: %v", time.Since(start), err)
			}
		}
		_ = h2.Release(context.Background())
	})
}
