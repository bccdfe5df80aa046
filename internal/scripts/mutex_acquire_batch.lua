-- mutex_acquire_batch.lua: the fast path of mutex_acquire.lua for several
-- acquire attempts of one session at once (see batch.go): one call, one
-- read of the caller's lease and at most one TIME for all of them
-- (new_token.lua, fastpath.lua's now_s), where each attempt alone would pay its own.
-- The fast path is mutex_acquire_fast.lua, as in mutex_acquire.lua.
-- KEYS[1] the caller's lease {ns}:s:<sid>   KEYS[2..n+1] the mutexes
-- {ns}:m:<name>, one per attempt (two attempts may name the same mutex:
-- they run in order, as two calls of mutex_acquire.lua would)
-- ARGV[1] options "<held>|<ld>|<i>", as the tail of mutex_acquire.lua's
-- ARGV[2]   ARGV[2..n+1] "<queue><hid>" per attempt: queue as in
-- mutex_acquire.lua ("1" or "2" to queue when busy), then the hold id
-- Returns one reply per attempt, in order: the reply mutex_acquire.lua's
-- fast path would give, or {R_SLOW} for an attempt the fast path does not
-- cover (no lease with g = "0", a withdrawn hold id, a holder whose lease
-- is gone, a lock delay, waiters before the caller, a queue left without
-- its mutex, a retried grant ...): the
-- client then sends mutex_acquire.lua for that one alone. An attempt
-- answered {R_SLOW} changed nothing.
local n = #ARGV - 1
local fields = {'g'}
for i = 1, n do
  fields[i + 1] = 'x:' .. string.sub(ARGV[i + 1], 2)
end
local lease = redis.call('HMGET', KEYS[1], unpack(fields))
local out = {}
if lease[1] ~= '0' then
  for i = 1, n do
    out[i] = {R_SLOW}
  end
  return out
end

local opts = ARGV[1]
local bar = string.find(opts, '|', 1, true)
local held, tail = string.sub(opts, 1, bar - 1), string.sub(opts, bar)
local p = string.match(KEYS[2], '^{[^}]*}:')
local ok, lk = true, nil -- the lease is checked above, for every attempt

for i = 1, n do
  local aq, m = ARGV[i + 1], KEYS[i + 1]
  local hid = string.sub(aq, 2)
  local r
  if not lease[i + 1] then
    --@inline mutex_acquire_fast.lua return=r
  end
  out[i] = r or {R_SLOW}
end
return out
