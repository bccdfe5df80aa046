package scripts

import (
	"slices"
	"testing"
)

// TestListingName: each listing names the keys the Keys functions build for
// its kind, and no other key of the namespace.
func TestListingName(t *testing.T) {
	k := NewKeys("ns")
	const name = "a:b:f" // colons, and a pool mark's suffix, inside a name
	own := []struct {
		what string
		l    Listing
		keys []string
	}{
		{"sessions", k.Sessions(), []string{k.Lease(name)}},
		{"mutex", k.Listing(Mutex), []string{k.Mutex(name)}},
		{"semaphore", k.Listing(Semaphore), []string{k.Semaphore(name)}},
		{"election", k.Listing(Election), []string{k.Election(name)}},
		{"rwmutex", k.Listing(RWMutex), []string{k.RWMutex(name)}},
		{"pool", k.Listing(Pool), []string{k.PoolFree(name), k.PoolHeld(name)}},
	}
	others := []string{
		k.Channel(name), k.Epoch(), k.Queue(Mutex, name), k.SemaphoreHolders(name),
		k.ElectionCandidates(name), k.ElectionChannel(name), k.RWMutexReaders(name),
		k.PoolBase(name) + "t", k.PoolBase(name) + "i:sid",
		NewKeys("other").Mutex(name), NewKeys("other").PoolFree(name),
		k.Prefix + keyMutex, k.PoolFree(""), // no name
	}
	for _, tc := range own {
		for _, key := range tc.keys {
			if got, ok := tc.l.Name(key); !ok || got != name {
				t.Errorf("%s: Name(%q) = %q, %v; want %q, true", tc.what, key, got, ok, name)
			}
		}
		notOwn := slices.Clone(others)
		for _, o := range own {
			if o.what != tc.what {
				notOwn = append(notOwn, o.keys...)
			}
		}
		for _, key := range notOwn {
			if got, ok := tc.l.Name(key); ok {
				t.Errorf("%s: Name(%q) = %q, true; want false", tc.what, key, got)
			}
		}
	}
}

// TestListingPattern: the pattern is the listing's keys' start, the
// namespace's glob characters escaped, then "*".
func TestListingPattern(t *testing.T) {
	k := NewKeys(`n*s?[x]\`)
	for _, tc := range []struct {
		what string
		l    Listing
		want string
	}{
		{"sessions", k.Sessions(), `{n\*s\?\[x\]\\}:s:*`},
		{"mutex", k.Listing(Mutex), `{n\*s\?\[x\]\\}:m:*`},
		{"pool", k.Listing(Pool), `{n\*s\?\[x\]\\}:pool:*`},
	} {
		if got := tc.l.Pattern(); got != tc.want {
			t.Errorf("%s: Pattern() = %q; want %q", tc.what, got, tc.want)
		}
	}
}

// TestListingUnknownKind: asking for a listing of no kind is a bug.
func TestListingUnknownKind(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Listing(0) did not panic")
		}
	}()
	NewKeys("ns").Listing(0)
}
