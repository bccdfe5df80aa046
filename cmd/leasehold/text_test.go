//go:build unix

package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/leasehold/leasehold/session"
)

func TestEsc(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"deploy", "deploy"},
		{"a.b:c/d-e_f", "a.b:c/d-e_f"},
		{"héllo-日本", "héllo-日本"}, // printable Unicode stays
		{`back\slash`, `back\slash`},
		{"a\nb", `"a\nb"`},
		{"\xff\xfe", `"\xff\xfe"`},
		{"tab\there", `"tab\there"`},
		{"with space", `"with space"`},
		{"nbsp\u00a0x", `"nbsp\u00a0x"`},
		{"bidi\u202eevil", `"bidi\u202eevil"`},
		{"\x1b[31mred", `"\x1b[31mred"`},
		{"", `""`},
		{"-", `"-"`},
		{`"quoted"`, `"\"quoted\""`},
	} {
		if got := esc(tc.in); got != tc.want {
			t.Errorf("esc(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
	if got := cell(""); got != "-" {
		t.Errorf(`cell("") = %q, want "-"`, got)
	}
}

func TestRound(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   time.Duration
		want string
	}{
		{10 * time.Second / 3, "3.3s"},
		{time.Second / 3, "333ms"},
		{2 * time.Second / 3, "667ms"},
		{500 * time.Microsecond, "500µs"},
		{9949 * time.Millisecond, "9.9s"},
		{10*time.Second + 400*time.Millisecond, "10s"},
		{125*time.Second + 600*time.Millisecond, "2m6s"},
		{-1500 * time.Millisecond, "-1.5s"},
	} {
		if got := round(tc.in).String(); got != tc.want {
			t.Errorf("round(%v) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// TestLeaseWatch: the warning comes once the lease has less than TTL/2
// left, once per outage, with a line when a heartbeat is confirmed again;
// each check says when to look next.
func TestLeaseWatch(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	const ttl = 10 * time.Second
	var deadline time.Time
	var out strings.Builder
	lw := &leaseWatch{deadline: func() time.Time { return deadline }, ttl: ttl, what: `mutex "m"`, w: &out}
	for i, step := range []struct {
		at, deadline time.Duration // since t0
		next         time.Duration
		say          string // "" for nothing
	}{
		{0, 9900 * time.Millisecond, 4900 * time.Millisecond, ""},
		{3 * time.Second, 13 * time.Second, 5 * time.Second, ""}, // a heartbeat moved the deadline
		{8 * time.Second, 13 * time.Second, 0, ""},               // exactly TTL/2 left: not yet, but look again at once
		{8100 * time.Millisecond, 13 * time.Second, 500 * time.Millisecond,
			`leasehold: warning: no heartbeat confirmed for 5.1s (Redis unreachable, paused or slow): mutex "m" will be lost in 4.9s unless Redis answers`},
		{8600 * time.Millisecond, 13 * time.Second, 500 * time.Millisecond, ""}, // still at risk: said once
		{12900 * time.Millisecond, 13 * time.Second, 100 * time.Millisecond, ""},
		{9100 * time.Millisecond, 18900 * time.Millisecond, 4800 * time.Millisecond,
			`leasehold: Redis answers again: heartbeat confirmed after 1s at risk; mutex "m" is still held`},
		{14 * time.Second, 18900 * time.Millisecond, 500 * time.Millisecond,
			`leasehold: warning: no heartbeat confirmed for 5.1s (Redis unreachable, paused or slow): mutex "m" will be lost in 4.9s unless Redis answers`},
		{18895 * time.Millisecond, 18900 * time.Millisecond, 10 * time.Millisecond, ""}, // never below 10ms
	} {
		out.Reset()
		deadline = t0.Add(step.deadline)
		next := lw.check(t0.Add(step.at))
		if next != step.next {
			t.Errorf("step %d: next check in %v, want %v", i, next, step.next)
		}
		want := ""
		if step.say != "" {
			want = step.say + "\n"
		}
		if got := out.String(); got != want {
			t.Errorf("step %d: said %q, want %q", i, got, want)
		}
	}
}

// TestLossText: one clean reason, no nested library prefixes, and a reset
// named as such for each kind.
func TestLossText(t *testing.T) {
	t.Parallel()
	takenAway := func(what string) error {
		return fmt.Errorf("%w: %s was taken away (reset, or removed from its pool)", session.ErrLost, what)
	}
	for _, tc := range []struct {
		name  string
		hd    held
		cause error
		want  string
	}{
		{"mutex reset", held{kind: "mutex", name: "x"}, takenAway(`mutex "x"`), `mutex "x" was reset by an operator`},
		{"rwmutex reset", held{kind: "rwmutex", name: "x"}, takenAway(`rwmutex "x"`), `rwmutex "x" was reset by an operator`},
		{"election reset", held{kind: "election", name: "e"}, takenAway(`election "e"`), `election "e": this leader was forced out by an operator (reset)`},
		{"semaphore reset", held{kind: "semaphore", name: "s"}, takenAway(`semaphore "s"`), `semaphore "s" was reset by an operator`},
		{"pool reset or member removed", held{kind: "pool", name: "p"}, takenAway(`pool "p"`),
			`pool "p" was taken away by an operator (the pool reset, or the member removed)`},
		{"heartbeat", held{kind: "mutex", name: "x"},
			fmt.Errorf("%w: no heartbeat confirmed within the TTL (%v)", session.ErrLeaseLost, 10*time.Second),
			`lost mutex "x": lease lost, no heartbeat confirmed within the TTL (10s)`},
		{"lease gone", held{kind: "semaphore", name: "s"},
			fmt.Errorf("%w: the lease no longer exists on the server", session.ErrLeaseLost),
			`lost semaphore "s": lease lost, the lease no longer exists on the server`},
		{"bare lease lost", held{kind: "mutex", name: "x"}, session.ErrLeaseLost, `lost mutex "x": lease lost`},
		{"not reclaimed", held{kind: "mutex", name: "x"},
			fmt.Errorf("%w: mutex \"x\" could not be reclaimed after Redis lost its data", session.ErrLost),
			`lost mutex "x": Redis lost its data and the hold could not be reclaimed`},
		{"release chain", held{kind: "mutex", name: "x"},
			fmt.Errorf("session: release mutex \"x\": %w", fmt.Errorf("%w: the local deadline has passed", session.ErrLeaseLost)),
			`lost mutex "x": lease lost, the local deadline has passed`},
		{"other", held{kind: "mutex", name: "x"}, errors.New("something else"), `lost mutex "x": something else`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := lossText(tc.hd, tc.cause); got != tc.want {
				t.Errorf("lossText = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCleanCause(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("session: release mutex \"m\": %w", context500()), `release mutex "m": context deadline exceeded`},
		{fmt.Errorf("session: release mutex \"m\": %w: it was no longer held", session.ErrLost), "it was no longer held"},
		{nil, "unknown cause"},
	} {
		if got := cleanCause(tc.err); got != tc.want {
			t.Errorf("cleanCause(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func context500() error { return errors.New("context deadline exceeded") }

// TestSubcommand: pool's subcommand is found past flags and their values.
func TestSubcommand(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"acquire", "p", "--", "true"}, 0},
		{[]string{"--namespace", "acquire", "ls", "p"}, 2},
		{[]string{"--namespace=x", "--ttl", "5s", "acquire", "p"}, 3},
		{[]string{"--json", "stats", "p"}, 1},
		{[]string{"-h"}, -1},
		{[]string{"--", "acquire"}, -1},
		{nil, -1},
	} {
		if got := subcommand(tc.args, runnerFlagSet()); got != tc.want {
			t.Errorf("subcommand(%q) = %d, want %d", tc.args, got, tc.want)
		}
	}
}

func TestGraceText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		g    grace
		want string
	}{
		{grace{left: 7 * time.Second, grace: 10 * time.Second}, "grants resume in 7s: the restart grace (10s) started 3s ago, when a session found the namespace's data missing (Redis lost it, or the namespace is new)"},
		{grace{left: 6449 * time.Millisecond}, "grants resume in 6.4s: a restart grace is running, since a session found the namespace's data missing (Redis lost it, or the namespace is new)"},
		{grace{grace: 3 * time.Second}, "no restart grace pending"},
		{grace{missing: true}, "the epoch marker is missing (Redis lost its data, or nothing used the namespace yet): the next session starts the restart grace"},
	} {
		if got := tc.g.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.g, got, tc.want)
		}
	}
}

// TestPrintStatusEscapes: names, owners, values and session ids with
// newlines, tabs, 0xFF (tabwriter's escape character) or spaces keep every
// row on one line and the table's columns intact.
func TestPrintStatusEscapes(t *testing.T) {
	t.Parallel()
	holder := &HolderStatus{Session: "s\n1", Hold: "s\n1.1", Owner: "own\ter\xff", Token: 5, RemainingMs: 9000}
	st := &Status{
		Namespace: "ns",
		Sessions: []SessionStatus{{ID: "s\n1", Owner: "own\ter\xff", TTLMs: 10000, RemainingMs: 9000,
			Holds: []HoldStatus{{Kind: "mutex", Name: "a\nb"}, {Kind: "pool", Name: "p\tq", Member: "m\xffx"}}}},
		Mutexes:    []MutexStatus{{Name: "a\nb", Holder: holder, LastToken: 5}, {Name: "\xff\xfe", LastToken: 3}},
		Semaphores: []SemaphoreStatus{{Name: "s s", Limit: 2, InUse: 1, Holders: []SemaphoreHolderStatus{{HolderStatus: *holder, Permits: 1}}}},
		Pools:      []PoolStatus{{Name: "p\tq", Members: []string{"m\xffx"}, Held: []PoolMemberStatus{{Key: "m\xffx", HolderStatus: *holder}}}},
		Elections:  []ElectionStatus{{Name: "e\x1b[31m", Leader: holder, Value: "v\nw"}},
	}
	var b strings.Builder
	printStatus(&b, st)
	out := b.String()
	if !utf8.ValidString(out) || strings.ContainsAny(out, "\t\xff\x1b") {
		t.Fatalf("raw bytes in the output:\n%q", out)
	}
	want := `namespace "ns"

SESSIONS  OWNER          TTL  LEFT  HOLDS
"s\n1"    "own\ter\xff"  10s  9.0s  mutex "a\nb", pool "p\tq" member "m\xffx"

MUTEXES     HOLDER SESSION  OWNER          TOKEN  LEFT  WAITERS
"a\nb"      "s\n1"          "own\ter\xff"  5      9.0s  0
"\xff\xfe"  (free)          -              3      -     0

SEMAPHORES  IN USE  WAITERS  HOLDERS (session owner permits token left)
"s s"       1/2     0        "s\n1" "own\ter\xff" 1 5 9.0s

POOLS   MEMBERS  FREE  WAITERS  HELD (key session owner token left)
"p\tq"  1        0     0        "m\xffx" "s\n1" "own\ter\xff" 5 9.0s

ELECTIONS    LEADER SESSION  OWNER          VALUE   TERM  LEFT  CANDIDATES
"e\x1b[31m"  "s\n1"          "own\ter\xff"  "v\nw"  5     9.0s  0
`
	if out != want {
		t.Errorf("got:\n%s\nwant:\n%s", out, want)
	}
}
