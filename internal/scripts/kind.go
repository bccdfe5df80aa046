package scripts

import (
	"context"
	"strconv"
)

// Kind is the kind of a resource.
type Kind uint8

// The resource kinds.
const (
	Mutex Kind = iota + 1
	Semaphore
	Pool
	Election
	RWMutex
)

// kindSpec is everything that differs between the kinds of resource, in
// one place: the names, the keys, the scripts and their arguments, the
// batch flights. Code that needs per-kind knowledge asks Kind.spec rather
// than switching on the kind.
type kindSpec struct {
	// name is the kind's name (Kind.String); short its code in queue keys
	// {ns}:q:<short>:<name> and in reclaim.lua's and verify.lua's
	// arguments.
	name, short string
	// key is the infix of the resource's key {ns}:<key><name> (a pool's
	// base: {ns}:pool:<name>:...); listed the suffixes, after its base, of
	// the keys by which Keys.Listing finds a resource of the kind, when
	// it has several keys: nil for the one key.
	key    string
	listed []string
	// acquire and release build the call of the kind's single script for
	// an acquire attempt of hold id hid (in wait, "1" to queue when busy,
	// "0" not to, or "2" where queueNew allows: see kindCall.queue) and
	// for its release ("1" or "0" in withdraw: withdraw hid for good).
	acquire func(e Env, r Resource, hid, wait string) execer
	release func(e Env, r Resource, hid, withdraw string) execer
	// queueNew tells whether the kind's acquire scripts take "2" in wait.
	queueNew bool
	// kept returns the keys that record a hold of r (see Keys.Kept);
	// waiting the further keys, before the queue, that a wait for r keeps
	// alive (see Keys.KeptWaiting). nil: none.
	kept, waiting func(k Keys, r Resource) []string
	// extra is the kind's argument of reclaim.lua and verify.lua for a
	// hold; nil: "".
	extra func(h Held) string
	// acquireFlight and releaseFlight send a flight of a session's
	// overlapping calls as one call of the kind's batch script (see
	// batch.go); nil for a kind without batch scripts (releaseFlight may
	// be nil alone: its releases then go one call each).
	acquireFlight func(e Env, ctx context.Context, as []kindCall) []attemptResult
	releaseFlight func(e Env, ctx context.Context, rs []kindCall) []releaseResult
	// releaseAlone reports a release of r that goes one call each although
	// the kind has releaseFlight (the batch script does not cover it);
	// nil: none.
	releaseAlone func(r Resource) bool
}

// kindSpecs holds the spec of each kind, indexed by the kind. init fills
// it: its functions reach kindSpecs themselves (a queue key names its
// kind's short code), which a variable's initializer may not.
var kindSpecs [RWMutex + 1]kindSpec

func init() {
	kindSpecs = [...]kindSpec{
		Mutex: {
			name: "mutex", short: "m", key: keyMutex, queueNew: true,
			acquire: func(e Env, r Resource, hid, wait string) execer {
				return execer{mutexAcquire, []string{e.K.Mutex(r.Name), e.K.Lease(SessionOf(hid))},
					[]string{hid, wait + e.sharded() + e.mutexOpts()}}
			},
			release: func(e Env, r Resource, hid, withdraw string) execer {
				return execer{mutexRelease, []string{e.K.Mutex(r.Name)}, []string{hid, e.sharded() + withdraw}}
			},
			kept:          func(k Keys, r Resource) []string { return []string{k.Mutex(r.Name)} },
			acquireFlight: Env.mutexAcquireFlight,
			releaseFlight: Env.mutexReleaseFlight,
		},
		Semaphore: {
			name: "semaphore", short: "sem", key: keySemaphore,
			acquire: func(e Env, r Resource, hid, wait string) execer {
				return execer{semAcquire, append(e.semKeys(r.Name), e.K.Lease(SessionOf(hid))),
					[]string{e.K.Prefix, hid, wait, e.sharded(), r.Name, strconv.FormatInt(r.N, 10), strconv.FormatInt(r.Limit, 10)}}
			},
			release: func(e Env, r Resource, hid, withdraw string) execer {
				return execer{semRelease, e.semKeys(r.Name), []string{e.K.Prefix, hid, e.sharded(), r.Name,
					strconv.FormatInt(r.N, 10), withdraw}}
			},
			kept: func(k Keys, r Resource) []string {
				return []string{k.SemaphoreHolders(r.Name), k.Semaphore(r.Name)}
			},
			extra:         func(h Held) string { return strconv.FormatInt(h.R.Limit, 10) },
			acquireFlight: Env.semAcquireFlight,
			releaseFlight: Env.semReleaseFlight,
		},
		Pool: {
			name: "pool", short: "pool", key: keyPool, listed: []string{poolFree, poolHeld},
			acquire: func(e Env, r Resource, hid, wait string) execer {
				return execer{poolAcquire, e.poolKeys(r.Name), []string{e.K.Prefix, hid, wait, e.sharded(), r.Name,
					e.K.PoolBase(r.Name), r.Key}}
			},
			release: func(e Env, r Resource, hid, withdraw string) execer {
				return execer{poolRelease, e.poolKeys(r.Name), []string{e.K.Prefix, hid, withdraw, e.sharded(), r.Name,
					e.K.PoolBase(r.Name), r.Key}}
			},
			// A pool's keys are its membership, which is configuration and
			// never expires: no kept keys.
			extra:         func(h Held) string { return h.Member },
			acquireFlight: Env.poolAcquireFlight,
			releaseFlight: Env.poolReleaseFlight,
		},
		Election: {
			name: "election", short: "el", key: keyElection,
			acquire: func(e Env, r Resource, hid, wait string) execer {
				return execer{elCampaign, e.elKeys(r.Name), []string{e.K.Prefix, hid, wait, e.sharded(), r.Name,
					r.Value, e.K.ElectionChannel(r.Name)}}
			},
			release: func(e Env, r Resource, hid, withdraw string) execer {
				return execer{elResign, e.elKeys(r.Name), []string{e.K.Prefix, hid, e.sharded(), r.Name,
					e.K.ElectionChannel(r.Name), withdraw}}
			},
			kept:    func(k Keys, r Resource) []string { return []string{k.Election(r.Name)} },
			waiting: func(k Keys, r Resource) []string { return []string{k.ElectionCandidates(r.Name)} },
			extra:   func(h Held) string { return h.R.Value },
		},
		RWMutex: {
			name: "rwmutex", short: "rw", key: keyRWMutex,
			acquire: func(e Env, r Resource, hid, wait string) execer {
				return execer{rwAcquire, append(e.rwKeys(r.Name), e.K.Lease(SessionOf(hid))),
					[]string{hid, wait + e.sharded() + oneIf(r.Shared)}}
			},
			release: func(e Env, r Resource, hid, withdraw string) execer {
				return execer{rwRelease, append(e.rwKeys(r.Name), e.K.Lease(SessionOf(hid))),
					[]string{hid, e.sharded() + withdraw + oneIf(r.Shared)}}
			},
			kept: func(k Keys, r Resource) []string {
				if r.Shared {
					return []string{k.RWMutexReaders(r.Name), k.RWMutex(r.Name)}
				}
				return []string{k.RWMutex(r.Name)}
			},
			waiting: func(k Keys, r Resource) []string {
				if r.Shared {
					return nil
				}
				return []string{k.RWMutexReaders(r.Name)}
			},
			extra: func(h Held) string {
				if h.R.Shared {
					return "r"
				}
				return "w"
			},
			acquireFlight: Env.rwAcquireFlight,
			releaseFlight: Env.rwReleaseFlight,
			// A reader's release checks the readers left (their
			// leases, their lock delays): the batch script has only a
			// writer's release.
			releaseAlone: func(r Resource) bool { return r.Shared },
		},
	}
}

// spec returns k's spec; ok is false for a value that names no kind.
func (k Kind) spec() (s *kindSpec, ok bool) {
	if k == 0 || int(k) >= len(kindSpecs) {
		return nil, false
	}
	return &kindSpecs[k], true
}

// mustSpec returns k's spec, and panics for a value that names no kind:
// for the callers that only ever get a Resource the library built.
func (k Kind) mustSpec() *kindSpec {
	s, ok := k.spec()
	if !ok {
		panic("scripts: unknown kind " + strconv.Itoa(int(k)))
	}
	return s
}

// String returns the kind's name: "mutex", "semaphore", "pool", "election"
// or "rwmutex".
func (k Kind) String() string {
	if s, ok := k.spec(); ok {
		return s.name
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

func (k Kind) short() string { return k.mustSpec().short }

// alone reports whether a release of r goes one call each (see
// releaseAlone).
func (s *kindSpec) alone(r Resource) bool { return s.releaseAlone != nil && s.releaseAlone(r) }
