-- election_lib.lua: included (after common.lua) by the election scripts.
-- An election is:
--   KEYS[1] {ns}:el:<name>     hash: hid (leader hold id), tok (last term), val (leader value), ld, free
--   KEYS[2] {ns}:q:el:<name>   list of candidate hold ids, FIFO
--   KEYS[3] {ns}:elc:<name>    hash: queued candidate hold id -> its value
-- Observers listen on the channel {ns}:elw:<name>, which gets
-- "<term>|<hold id>|<value>" on every change ("0||" when nobody leads).

-- The single-holder helpers of an election's hash (hid, tok, ld, i, free;
-- the mutex keeps the same state in a string, see mutex_lib.lua).

-- single_state reads the fields of single-holder resource hash k (an
-- election) in one call: hid (holder), tok (last token), free (end of a
-- lock delay, ms), ld (the holder's lock delay, ms). Missing ones are false.
local function single_state(k)
  local v = redis.call('HMGET', k, 'hid', 'tok', 'free', 'ld')
  return {hid = v[1], tok = v[2], free = v[3], ld = v[4]}
end

-- single_idle lets single-holder resource hash k expire when nobody holds it
-- and its waiter queue q is empty.
local function single_idle(k, q)
  local v = redis.call('HMGET', k, 'hid', 'i', 'free')
  if not v[1] and redis.call('LLEN', q) == 0 then
    expire_idle(k, v[2], v[3])
  end
end

-- single_grant makes hid the holder of single-holder resource hash k and
-- returns its new token. last is the stored token when the caller knows it
-- (pass nil otherwise). hid's session's lock delay (ms) is copied so that it
-- still applies after that session's lease is gone, and its TTL sets how long
-- the resource is kept once idle.
local function single_grant(p, k, hid, last)
  if last == nil then
    last = redis.call('HGET', k, 'tok')
  end
  local l = redis.call('HMGET', p .. K_LEASE .. sid_of(hid), 'ld', 'ttl')
  local tok = math.max(tonumber(last or '0') + 1, now_us())
  redis.call('HSET', k, 'hid', hid, 'tok', string.format('%.0f', tok), 'ld', l[1] or '0', 'i', idle_ms(l[2]))
  keep_at_least(k, held_ms(l[2], l[1]))
  return tok
end

-- single_free reports whether single-holder resource k, whose fields st were
-- read by single_state, has no live holder and no lock delay pending; a
-- holder whose lease is gone is cleared, starting its lock delay. The second
-- result is the time to wait (ms) when it is not free.
local function single_free(p, k, st)
  if st.hid then
    if alive(p, st.hid) then
      return false, lease_pttl(p, st.hid)
    end
    local ld = tonumber(st.ld or '0')
    if ld > 0 then
      st.free = now_ms() + ld
      redis.call('HSET', k, 'free', string.format('%.0f', st.free))
      keep_at_least(k, ld)
    end
    redis.call('HDEL', k, 'hid')
    st.hid = false
  end
  local free = tonumber(st.free or '0')
  if free > 0 then
    local wait = free - now_ms()
    if wait > 0 then
      return false, wait
    end
    redis.call('HDEL', k, 'free')
  end
  return true, 0
end

local function el_announce(sharded, ch, term, hid, val)
  publish(sharded, ch, string.format('%.0f', term) .. '|' .. hid .. '|' .. val)
end

local function el_grant(p, k, c, hid, val, sharded, ch)
  local tok = single_grant(p, k, hid)
  redis.call('HSET', k, 'val', val)
  redis.call('HDEL', c, hid)
  el_announce(sharded, ch, tok, hid, val)
  return tok
end

-- el_first_live is first_live for the candidate queue q: it also forgets the
-- values (in c) of the dead candidates it drops, which nothing else would.
local function el_first_live(p, q, c)
  while true do
    local h = redis.call('LINDEX', q, '0')
    if not h or alive(p, h) then
      return h or nil
    end
    redis.call('LPOP', q)
    redis.call('HDEL', c, h)
  end
end

-- el_handoff makes the first live candidate the leader and notifies it, or
-- announces that nobody leads. During a restart grace nobody is elected: the
-- candidates stay queued and re-check when it is over.
local function el_handoff(p, k, q, c, sharded, name, ch)
  local nxt = nil
  if grace_left(p) == 0 then
    nxt = el_first_live(p, q, c)
  end
  while nxt do
    redis.call('LPOP', q)
    local val = redis.call('HGET', c, nxt)
    if val then
      local tok = el_grant(p, k, c, nxt, val, sharded, ch)
      notify(p, sharded, nxt, 'g', tok, name)
      return nxt
    end
    nxt = el_first_live(p, q, c)
  end
  redis.call('HDEL', k, 'val')
  el_announce(sharded, ch, 0, '', '')
  single_idle(k, q)
  return nil
end
