-- election_lib.lua: helpers for the election scripts, prepended after common.lua.
-- An election is:
--   KEYS[1] {ns}:el:<name>     hash: hid (leader hold id), tok (last term), val (leader value), ld, free
--   KEYS[2] {ns}:q:el:<name>   list of candidate hold ids, FIFO
--   KEYS[3] {ns}:elc:<name>    hash: queued candidate hold id -> its value
-- Observers listen on the channel {ns}:elw:<name>, which gets
-- "<term>|<hold id>|<value>" on every change ("0||" when nobody leads).

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
    local h = redis.call('LINDEX', q, 0)
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
      notify(p, sharded, nxt, 'g|' .. nxt .. '|' .. string.format('%.0f', tok) .. '|' .. name)
      return nxt
    end
    nxt = el_first_live(p, q, c)
  end
  redis.call('HDEL', k, 'val')
  el_announce(sharded, ch, 0, '', '')
  single_idle(k, q)
  return nil
end
