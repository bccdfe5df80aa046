-- rwmutex_release.lua (with rwmutex_lib.lua): release a read-write mutex
-- held by a hold id, or withdraw that hold id from the queue. Releasing (or
-- withdrawing a queued writer that kept readers out) serves the queue in
-- the same call: the next writer, or all the consecutive readers at its head.
-- KEYS[1] {ns}:rw:<name>   KEYS[2] readers {ns}:rwr:<name>
-- KEYS[3] queue {ns}:q:rw:<name>
-- ARGV[1] hold id   ARGV[2] options "<sharded><withdraw><shared>": sharded
-- "1" for sharded pub/sub, withdraw "1" to withdraw the hold id for good
-- (see withdraw in common.lua), shared "1" for a read hold
-- Returns 1 when it was held and is released, 2 when it was only queued, 0
-- when it is neither (already released, or taken away): idempotent.
local hid, k, r, q = ARGV[1], KEYS[1], KEYS[2], KEYS[3]
local sharded = string.sub(ARGV[2], 1, 1)
local shared = string.sub(ARGV[2], 3, 3) == '1'
local p = prefix_of(k)
local name = string.sub(k, #p + 4)
if string.sub(ARGV[2], 2, 2) == '1' then
  withdraw(p, hid)
end
local out = 0
if shared then
  if redis.call('HDEL', r, hid) == 1 then
    out = 1
  end
elseif redis.call('HGET', k, 'w') == hid then
  redis.call('HDEL', k, 'w', 'wld')
  out = 1
end
if out == 0 and redis.call('LREM', q, 0, rw_entry(hid, shared)) > 0 then
  out = 2
end
if out ~= 0 then
  rw_serve(p, k, r, q, sharded, name, nil)
  rw_idle(p, k, r, q)
end
return out
