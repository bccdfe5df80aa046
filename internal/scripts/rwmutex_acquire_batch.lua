-- rwmutex_acquire_batch.lua: the fast path of rwmutex_acquire.lua for
-- several acquire attempts of one session at once (see batch.go): one
-- call, one read of the caller's lease and at most one TIME for all of
-- them (new_token.lua, fastpath.lua's now_s). The fast path is
-- rwmutex_acquire_fast.lua, as in rwmutex_acquire.lua.
-- KEYS[1] the caller's lease {ns}:s:<sid>, then per attempt the mutex
-- {ns}:rw:<name>, its readers {ns}:rwr:<name> and its queue
-- {ns}:q:rw:<name> (as rwmutex_acquire.lua's KEYS[1..3]; two attempts may
-- name the same mutex: they run in order, as two calls would)
-- ARGV per attempt: "<queue><shared><hid>": queue "1" to queue when busy,
-- shared "1" for a read hold, then the hold id
-- Returns one reply per attempt, in order: the reply rwmutex_acquire.lua's
-- fast path would give, or {R_SLOW} for an attempt the fast path does not
-- cover (no lease with g = "0", a withdrawn hold id, or anything
-- rwmutex_acquire_fast.lua leaves to the full path): the client then
-- sends rwmutex_acquire.lua for that one alone. An attempt answered
-- {R_SLOW} changed nothing.
local n = #ARGV
local fields = {'g', 'ttl', 'ld'}
for i = 1, n do
  fields[i + 3] = 'x:' .. string.sub(ARGV[i], 3)
end
local lease = redis.call('HMGET', KEYS[1], unpack(fields))
local out = {}
for i = 1, n do
  local reply
  if lease[1] == '0' and not lease[i + 3] then
    local aq = ARGV[i]
    local k, rd, q, hid = KEYS[3 * i - 1], KEYS[3 * i], KEYS[3 * i + 1], string.sub(aq, 3)
    local shared, ttl, ld = string.sub(aq, 2, 2) == '1', lease[2], lease[3]
    --@inline rwmutex_acquire_fast.lua return=reply
  end
  out[i] = reply or {R_SLOW}
end
return out
