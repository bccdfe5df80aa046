package lease

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/internal/scripts"
)

// redisErrors returns two errors of a real Redis protocol reply (an
// in-process miniredis): one that Redis refused for good (an unknown
// command: scripts.Refused) and one that retrying might fix.
func redisErrors(t *testing.T) (refused, other error) {
	t.Helper()
	m := miniredis.RunT(t)
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{m.Addr()},
		DisableCache: true, ForceSingleClient: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	refused = c.Do(ctx, c.B().Arbitrary("NOSUCHCOMMAND").Build()).Error()
	other = c.Do(ctx, c.B().Arbitrary("GET").Build()).Error() // wrong number of arguments
	if _, ok := rueidis.IsRedisErr(refused); !ok || !scripts.Refused(refused) {
		t.Fatalf("unknown command: %v; want a Redis error that scripts.Refused matches", refused)
	}
	if _, ok := rueidis.IsRedisErr(other); !ok || scripts.Refused(other) {
		t.Fatalf("GET without a key: %v; want a Redis error that scripts.Refused does not match", other)
	}
	return refused, other
}

// decideCase is one row of decide's table: the outcome's fields that vary
// (the resource and the hold id are the same in every row).
type decideCase struct {
	name     string
	ev       event
	wait     bool
	g        scripts.Grant
	err      error
	canceled bool // ctx has ended
	ended    bool // the session has ended
	want     step
	wantErr  error  // what the error must match (errors.Is); nil: no error
	wantText string // a part of the error's text, if not ""
}

var (
	testCause    = errors.New("the caller gave up")                                      // ctx's cause
	testEnd      = fmt.Errorf("%w: no heartbeat confirmed within the TTL", ErrLeaseLost) // the session's end
	testResource = scripts.Resource{Kind: scripts.Mutex, Name: "m"}
	testHoldID   = "s1.7"
)

var stepNames = map[step]string{stepGrant: "grant", stepWait: "wait", stepRetry: "retry", stepAttempt: "attempt",
	stepFail: "fail", stepWithdraw: "withdraw", stepLose: "lose"}

func (tc decideCase) outcome() outcome {
	o := outcome{r: testResource, hid: testHoldID, wait: tc.wait, ev: tc.ev, g: tc.g, err: tc.err}
	if tc.canceled {
		o.canceled = testCause
	}
	if tc.ended {
		o.ended = testEnd
	}
	return o
}

// TestDecide checks every row of decide's table: each reply and error that
// a claim tells apart, with and without wait, with ctx or the session
// ended or not. The withdraw rows are the safety rule: whatever may have
// left the hold id queued or granted in Redis withdraws it on the way out.
func TestDecide(t *testing.T) {
	refused, redisOther := redisErrors(t)
	granted := scripts.Grant{Status: scripts.Granted, Token: 7, Resource: "m"}
	busy := scripts.Grant{Status: scripts.Busy, Wait: time.Second, Position: -1}
	queued := scripts.Grant{Status: scripts.Busy, Wait: time.Second, Position: 2}
	grace := scripts.Grant{Status: scripts.Grace, Wait: 3 * time.Second}
	withdrawn := scripts.Grant{Status: scripts.Withdrawn}
	leaseGone := scripts.Grant{Status: scripts.LeaseGone}
	connErr := io.EOF // a dropped connection: the request may or may not have run
	limit := fmt.Errorf("%w: stored 3, asked 2", scripts.ErrLimitMismatch)
	notMember := fmt.Errorf("%w: %q", scripts.ErrNotMember, "k")
	notReplicated := fmt.Errorf("%w: 0 of 1 replicas within 1s", scripts.ErrNotReplicated)
	unconfirmed := fmt.Errorf("%w: the lease no longer exists on the server", ErrLeaseLost)

	for _, tc := range []decideCase{
		// An attempt answered.
		{name: "granted", g: granted, want: stepGrant},
		{name: "granted, waiting", wait: true, g: granted, want: stepGrant},
		{name: "granted, ctx ended (the attempt is over: the hold is returned)", g: granted, canceled: true, want: stepGrant},
		{name: "granted, waiting, ctx ended: given back", wait: true, g: granted, canceled: true,
			want: stepWithdraw, wantErr: testCause},
		{name: "granted, waiting, ctx and session ended: given back", wait: true, g: granted, canceled: true, ended: true,
			want: stepWithdraw, wantErr: testCause},
		{name: "granted, waiting, session ended (the hold table refuses it)", wait: true, g: granted, ended: true, want: stepGrant},
		{name: "busy", g: busy, want: stepFail, wantErr: scripts.ErrBusy},
		{name: "busy, ctx ended", g: busy, canceled: true, want: stepFail, wantErr: scripts.ErrBusy},
		{name: "busy, session ended", g: busy, ended: true, want: stepFail, wantErr: scripts.ErrBusy},
		{name: "queued", wait: true, g: queued, want: stepWait},
		{name: "queued, ctx ended (the wait sees it)", wait: true, g: queued, canceled: true, want: stepWait},
		{name: "queued, session ended (the wait sees it)", wait: true, g: queued, ended: true, want: stepWait},
		{name: "restart grace", g: grace, want: stepFail, wantErr: ErrRestartGrace, wantText: "grants resume in 3s"},
		{name: "restart grace, waiting", wait: true, g: grace, want: stepWait},
		{name: "restart grace, waiting, ctx ended (the wait sees it)", wait: true, g: grace, canceled: true, want: stepWait},
		{name: "withdrawn", g: withdrawn, want: stepFail, wantText: `acquire mutex "m": hold id s1.7 was withdrawn`},
		{name: "withdrawn, waiting", wait: true, g: withdrawn, want: stepFail, wantText: "was withdrawn"},
		{name: "withdrawn, waiting, ctx ended", wait: true, g: withdrawn, canceled: true, want: stepFail, wantText: "was withdrawn"},
		{name: "lease gone", g: leaseGone, want: stepLose, wantErr: ErrLeaseLost, wantText: "no longer exists"},
		{name: "lease gone, waiting", wait: true, g: leaseGone, want: stepLose, wantErr: ErrLeaseLost},
		{name: "lease gone, waiting, ctx ended", wait: true, g: leaseGone, canceled: true, want: stepLose, wantErr: ErrLeaseLost},

		// An attempt failed: the replies that leave nothing of the hold id.
		{name: "limit mismatch", err: limit, want: stepFail, wantErr: scripts.ErrLimitMismatch},
		{name: "limit mismatch, waiting, ctx ended", wait: true, err: limit, canceled: true,
			want: stepFail, wantErr: scripts.ErrLimitMismatch},
		{name: "not a member", err: notMember, want: stepFail, wantErr: scripts.ErrNotMember},
		{name: "not a member, waiting, session ended", wait: true, err: notMember, ended: true,
			want: stepFail, wantErr: scripts.ErrNotMember},
		// A grant that too few replicas acknowledged.
		{name: "not replicated", err: notReplicated, want: stepWithdraw, wantErr: ErrNotReplicated,
			wantText: `acquire mutex "m": grant rolled back`},
		{name: "not replicated, waiting, ctx ended", wait: true, err: notReplicated, canceled: true,
			want: stepWithdraw, wantErr: ErrNotReplicated, wantText: "grant rolled back"},
		// An error with an unknown outcome: retried only while waiting with
		// ctx and the session alive, and only if retrying may fix it.
		{name: "connection error", err: connErr, want: stepWithdraw, wantErr: io.EOF, wantText: `session: acquire mutex "m"`},
		{name: "connection error, waiting", wait: true, err: connErr, want: stepRetry},
		{name: "connection error, waiting, ctx ended", wait: true, err: connErr, canceled: true,
			want: stepWithdraw, wantErr: testCause},
		{name: "connection error, waiting, session ended", wait: true, err: connErr, ended: true,
			want: stepWithdraw, wantErr: testEnd},
		{name: "connection error, waiting, ctx and session ended", wait: true, err: connErr, canceled: true, ended: true,
			want: stepWithdraw, wantErr: testEnd},
		{name: "connection error, ctx ended", err: connErr, canceled: true, want: stepWithdraw, wantErr: testCause},
		{name: "timeout, waiting", wait: true, err: context.DeadlineExceeded, want: stepRetry},
		{name: "timeout", err: context.DeadlineExceeded, want: stepWithdraw, wantErr: context.DeadlineExceeded},
		{name: "ctx's end in the call, waiting", wait: true, err: context.Canceled, canceled: true,
			want: stepWithdraw, wantErr: testCause},
		{name: "Redis error", err: redisOther, want: stepWithdraw, wantErr: redisOther},
		{name: "Redis error, waiting", wait: true, err: redisOther, want: stepRetry},
		{name: "Redis error, waiting, ctx ended", wait: true, err: redisOther, canceled: true,
			want: stepWithdraw, wantErr: testCause},
		{name: "refused", err: refused, want: stepWithdraw, wantErr: ErrRedisRefused},
		{name: "refused, waiting", wait: true, err: refused, want: stepWithdraw, wantErr: ErrRedisRefused},
		{name: "refused, waiting, ctx ended", wait: true, err: refused, canceled: true,
			want: stepWithdraw, wantErr: testCause},
		{name: "refused, waiting, session ended", wait: true, err: refused, ended: true,
			want: stepWithdraw, wantErr: testEnd},

		// A hand-off reached the wait (err: confirm's).
		{name: "handed off", ev: handedOff, wait: true, g: granted, want: stepGrant},
		{name: "handed off, ctx ended: given back", ev: handedOff, wait: true, g: granted, canceled: true,
			want: stepWithdraw, wantErr: testCause},
		{name: "handed off, session ended (the hold table refuses it)", ev: handedOff, wait: true, g: granted, ended: true,
			want: stepGrant},
		{name: "handed off, not replicated", ev: handedOff, wait: true, g: granted, err: notReplicated,
			want: stepWithdraw, wantErr: ErrNotReplicated, wantText: `acquire mutex "m": hand-off rolled back`},
		{name: "handed off, lease gone at confirmation", ev: handedOff, wait: true, g: granted, err: unconfirmed,
			want: stepWithdraw, wantErr: ErrLeaseLost, wantText: "hand-off rolled back"},
		{name: "handed off, confirmation failed", ev: handedOff, wait: true, g: granted, err: connErr,
			want: stepWithdraw, wantErr: io.EOF, wantText: "hand-off rolled back"},
		{name: "handed off, refused at confirmation", ev: handedOff, wait: true, g: granted, err: refused,
			want: stepWithdraw, wantErr: refused, wantText: "hand-off rolled back"},

		// A wait ended without a grant.
		{name: "woke", ev: woke, wait: true, want: stepAttempt},
		{name: "woke, ctx ended", ev: woke, wait: true, canceled: true, want: stepWithdraw, wantErr: testCause},
		{name: "woke, session ended", ev: woke, wait: true, ended: true, want: stepFail, wantErr: testEnd},
		{name: "woke, ctx and session ended", ev: woke, wait: true, canceled: true, ended: true,
			want: stepFail, wantErr: testEnd},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decide(tc.outcome())
			if got != tc.want {
				t.Errorf("step = %s (err %v), want %s", stepNames[got], err, stepNames[tc.want])
			}
			switch {
			case tc.wantErr == nil && tc.wantText == "":
				if err != nil {
					t.Errorf("err = %v, want nil", err)
				}
			case err == nil:
				t.Errorf("err = nil, want %v %q", tc.wantErr, tc.wantText)
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Errorf("err = %v, want one matching %v", err, tc.wantErr)
			case !strings.Contains(err.Error(), tc.wantText):
				t.Errorf("err = %v, want one containing %q", err, tc.wantText)
			}
			if is, want := errors.Is(err, ErrRedisRefused), errors.Is(tc.wantErr, ErrRedisRefused); is != want {
				t.Errorf("err = %v: matches ErrRedisRefused: %v, want %v", err, is, want)
			}
		})
	}
}

// TestDecideInvariants checks decide's rules over every combination of
// its inputs: a claim whose ctx ended while it waited is never granted
// (TestCanceledWaiterNotGranted, as a rule); only a claim that waits
// waits, retries or attempts again; the steps that end a claim, and only
// they, carry an error; and only a grant reply or a hand-off grants.
func TestDecideInvariants(t *testing.T) {
	refused, redisOther := redisErrors(t)
	statuses := []scripts.Status{scripts.Granted, scripts.Busy, scripts.Grace, scripts.Withdrawn, scripts.LeaseGone}
	errs := []error{nil, io.EOF, context.DeadlineExceeded, context.Canceled, refused, redisOther,
		scripts.ErrLimitMismatch, scripts.ErrNotMember, scripts.ErrNotReplicated, ErrLeaseLost}
	for _, ev := range []event{replied, handedOff, woke} {
		for _, st := range statuses {
			for _, e := range errs {
				for bits := range 8 {
					tc := decideCase{ev: ev, g: scripts.Grant{Status: st}, err: e,
						wait: bits&1 != 0, canceled: bits&2 != 0, ended: bits&4 != 0}
					if ev != replied && !tc.wait {
						continue // only a claim that waits waits for a hand-off or wakes
					}
					if ev == handedOff && (st != scripts.Granted || tc.canceled && e != nil) {
						continue // a hand-off is a grant, not confirmed once ctx has ended
					}
					if ev == woke && (st != scripts.Busy || e != nil) {
						continue // a wake carries no reply
					}
					got, err := decide(tc.outcome())
					what := fmt.Sprintf("decide(%+v) = %s, %v", tc.outcome(), stepNames[got], err)
					if tc.wait && tc.canceled && got == stepGrant {
						t.Errorf("%s: a claim whose ctx ended while it waited is granted", what)
					}
					if !tc.wait && (got == stepWait || got == stepRetry || got == stepAttempt) {
						t.Errorf("%s: a claim that does not wait waits", what)
					}
					if ends := got == stepFail || got == stepWithdraw || got == stepLose; ends != (err != nil) {
						t.Errorf("%s: an error with a step that does not end the claim, or none with one that does", what)
					}
					if got == stepGrant && (ev == woke || st != scripts.Granted || e != nil) {
						t.Errorf("%s: granted without a grant", what)
					}
				}
			}
		}
	}
}
