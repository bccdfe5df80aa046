package fence

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/session"
)

// The scripts share lib.lua, prepended here: constant text, never input.
var (
	//go:embed lib.lua
	libLua string
	//go:embed set.lua
	setLua string
	//go:embed delete.lua
	deleteLua string
	//go:embed getfenced.lua
	getFencedLua string

	setScript       = rueidis.NewLuaScript(libLua + setLua)
	deleteScript    = rueidis.NewLuaScript(libLua + deleteLua)
	getFencedScript = rueidis.NewLuaScript(libLua + getFencedLua)
)

// Store is a fenced key-value store in Redis: every write carries a fencing
// token, and a key refuses tokens lower than the highest that has used it.
// A Store is immutable and safe for concurrent use; it holds no connection
// of its own and starts no goroutine.
type Store struct {
	c    rueidis.Client
	name string
}

// New returns the store called name on client c. name scopes its keys:
// stores of different names never share one. It is checked (like every
// key) by each call, with session.CheckName. New panics if c is nil.
//
// c may be a standalone, Sentinel or Redis Cluster client, and need not be
// the one the locks live on; the Redis that holds the store must keep its
// data as well as the data it fences (see the package documentation).
func New(c rueidis.Client, name string) *Store {
	if c == nil {
		panic("fence: New with a nil client")
	}
	return &Store{c: c, name: name}
}

// Name returns the store's name.
func (s *Store) Name() string { return s.name }

// Set writes value to key if token is at least the highest token that has
// used key (set, deleted or read it with GetFenced), and makes token that
// highest token. Otherwise it returns an error matching ErrStale and changes
// nothing. The value does not expire (a TTL an earlier SetTTL gave it is
// removed). ctx bounds the call; if it ends before Redis answers, the write
// may or may not have happened.
func (s *Store) Set(ctx context.Context, key string, value []byte, token int64) error {
	return s.set(ctx, key, value, token, 0)
}

// SetTTL is Set with a value that expires after ttl (at least a
// millisecond; sub-millisecond parts are dropped). Only the value expires:
// the key's highest token stays, so that a stale holder cannot write the key
// again once the value is gone (see the package documentation for what that
// costs in memory).
func (s *Store) SetTTL(ctx context.Context, key string, value []byte, token int64, ttl time.Duration) error {
	if ttl < time.Millisecond {
		return fmt.Errorf("%w: %v, want at least 1ms", ErrInvalidTTL, ttl)
	}
	return s.set(ctx, key, value, token, ttl)
}

func (s *Store) set(ctx context.Context, key string, value []byte, token int64, ttl time.Duration) error {
	mark, val, tok, err := s.prepare(key, token)
	if err != nil {
		return err
	}
	r := setScript.Exec(ctx, s.c, []string{mark, val}, []string{tok, string(value), strconv.FormatInt(ttl.Milliseconds(), 10)})
	_, err = s.reply("set", key, token, r)
	return err
}

// Delete deletes key's value if token is at least the highest token that
// has used key, and makes token that highest token; deleting a key that has
// no value succeeds. Otherwise it returns an error matching ErrStale and
// changes nothing. The highest token outlives the value: a later Set with a
// lower token is refused, so a stale holder cannot create the key again.
// ctx bounds the call, as for Set.
func (s *Store) Delete(ctx context.Context, key string, token int64) error {
	mark, val, tok, err := s.prepare(key, token)
	if err != nil {
		return err
	}
	_, err = s.reply("delete", key, token, deleteScript.Exec(ctx, s.c, []string{mark, val}, []string{tok}))
	return err
}

// Get returns key's value and the token of the call that wrote it, or an
// error matching ErrNotFound. It is a plain read, one HMGET: it checks no
// token and changes nothing, so a holder must not base a write on it (see
// GetFenced). ctx bounds the call; give it a deadline, since rueidis
// retries a read-only command for as long as ctx lasts while Redis is down.
func (s *Store) Get(ctx context.Context, key string) ([]byte, int64, error) {
	if err := s.check(key); err != nil {
		return nil, 0, err
	}
	_, val := s.keys(key)
	vs, err := s.c.Do(ctx, s.c.B().Hmget().Key(val).Field("v", "t").Build()).ToArray()
	if err != nil {
		return nil, 0, fmt.Errorf("fence: get %q: %w", key, err)
	}
	return s.value(key, vs)
}

// GetFenced is the read of a read-modify-write: it returns key's value and
// the token that wrote it (or an error matching ErrNotFound) if token is at
// least the highest token that has used key, and makes token that highest
// token, whether or not key has a value. Otherwise it returns an error
// matching ErrStale and changes nothing.
//
// Raising the highest token on a read is what keeps an update from being
// lost. With Get, holder A (token 10) reads 5 and pauses; its hold expires,
// B (token 11) reads 5 too; A wakes and writes 6 with token 10, which Set
// accepts since no higher token has written yet; B then writes 6 with token
// 11: A's increment is lost, although every Set passed the check. With
// GetFenced, B's read raises the key's token to 11 before A writes, so A's
// Set is refused with ErrStale, and B's 6 is the only write.
//
// ctx bounds the call, as for Set.
func (s *Store) GetFenced(ctx context.Context, key string, token int64) ([]byte, int64, error) {
	mark, val, tok, err := s.prepare(key, token)
	if err != nil {
		return nil, 0, err
	}
	vs, err := s.reply("read", key, token, getFencedScript.Exec(ctx, s.c, []string{mark, val}, []string{tok}))
	if err != nil {
		return nil, 0, err
	}
	return s.value(key, vs)
}

// check checks the store's name and key.
func (s *Store) check(key string) error {
	if err := session.CheckName(s.name); err != nil {
		return fmt.Errorf("fence: store name: %w", err)
	}
	if err := session.CheckName(key); err != nil {
		return fmt.Errorf("fence: key: %w", err)
	}
	return nil
}

// prepare checks a call's input and returns its keys and token argument.
func (s *Store) prepare(key string, token int64) (mark, val, tok string, err error) {
	if err := s.check(key); err != nil {
		return "", "", "", err
	}
	if err := checkToken(token); err != nil {
		return "", "", "", err
	}
	mark, val = s.keys(key)
	return mark, val, strconv.FormatInt(token, 10), nil
}

// keys returns the Redis keys of key: its highest token <tag>:hi and its
// value hash <tag>:v, both under the hash tag {fence:<len(name)>:<name>:<key>},
// so that they share one Redis Cluster slot, and different keys spread over
// the slots. The name's length keeps store "a:b" key "c" apart from store
// "a" key "b:c". A '}' in the name or key ends the tag early, but the same
// way for both keys.
func (s *Store) keys(key string) (mark, val string) {
	tag := "{fence:" + strconv.Itoa(len(s.name)) + ":" + s.name + ":" + key + "}"
	return tag + ":hi", tag + ":v"
}

// reply decodes a script's reply, {1, ...} or {0, mark}, and returns what
// follows the 1 or an error matching ErrStale.
func (s *Store) reply(op, key string, token int64, r rueidis.RedisResult) ([]rueidis.RedisMessage, error) {
	vs, err := r.ToArray()
	if err == nil && len(vs) == 0 {
		err = fmt.Errorf("empty reply")
	}
	if err != nil {
		return nil, fmt.Errorf("fence: %s %q: %w", op, key, err)
	}
	ok, err := vs[0].AsInt64()
	if err != nil {
		return nil, fmt.Errorf("fence: %s %q: %w", op, key, err)
	}
	if ok == 0 {
		mark := int64(0)
		if len(vs) > 1 {
			mark, _ = vs[1].AsInt64()
		}
		return nil, fmt.Errorf("%w: %s %q with token %d: token %d has used it", ErrStale, op, key, token, mark)
	}
	return vs[1:], nil
}

// value decodes [value, writer token], both nil (or absent) for no value.
func (s *Store) value(key string, vs []rueidis.RedisMessage) ([]byte, int64, error) {
	if len(vs) < 2 || vs[0].IsNil() {
		return nil, 0, fmt.Errorf("%w: %q", ErrNotFound, key)
	}
	v, err := vs[0].AsBytes()
	if err != nil {
		return nil, 0, fmt.Errorf("fence: %q: value: %w", key, err)
	}
	tok, err := vs[1].AsInt64()
	if err != nil {
		return nil, 0, fmt.Errorf("fence: %q: token: %w", key, err)
	}
	return v, tok, nil
}

func checkToken(token int64) error {
	if token <= 0 {
		return fmt.Errorf("%w: %d, want > 0", ErrInvalidToken, token)
	}
	return nil
}
