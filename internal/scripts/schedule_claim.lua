-- schedule_claim.lua: decide, in one atomic step against the server's clock
-- and the job's record of the last slot run, whether slot ARGV[3] of a
-- scheduled job is the caller's to run; if so, record it as run.
-- KEYS[1] job record {ns}:job:<name>: hash of slot (the last slot run,
--         unix ms), tok (its run's token), spec, tz
-- KEYS[2] job history {ns}:jobh:<name>: hash of token -> run record
--         "<slot>|<start>|<end>|<prev>|<lost>|<hid>|<err>" (server ms; end 0
--         while running; prev the slot run before this one, 0 for none)
-- KEYS[3] the job's mutex {ns}:m:schedule:<name>
-- KEYS[4] the epoch marker {ns}:epoch
-- ARGV[1] hold id of the caller's hold of the mutex   ARGV[2] its token
-- ARGV[3] the slot (unix ms)   ARGV[4] grace ms: how late after its time
-- a slot may still start; -1 for no limit   ARGV[5] keep ms: how long the
-- record and history live after this write   ARGV[6] history size
-- ARGV[7] the job's spec   ARGV[8] its time zone   ARGV[9] the grace that
-- applies instead of ARGV[4] when the job has no record
-- Returns {code, server now ms, last slot run ms (0: none)}, code:
--    1 claimed: the slot is now the last slot run; its run record is added
--    0 not holder: the mutex is another hold's, or the caller's lease is gone
--   -1 done: the slot is not after the last slot run, or the token is not
--      above the last run's
--   -2 early: the slot's time has not come on the server's clock
--   -3 late: the slot's time passed more than the grace ago
--   -4 lost data: there is no record, and the slot is not after the
--      namespace's last data loss (a run's record may have gone with it)
-- Nothing is written unless it returns 1. The codes are this script's own
-- (schedule.go JobClaimCode), named below, not the protocol's R_* codes.
--@include mutex_value.lua
local claimed, not_holder, done, early, late, lost_data = 1, 0, -1, -2, -3, -4
local rec, hist, hid = KEYS[1], KEYS[2], ARGV[1]
local now = now_ms()
local st = redis.call('HMGET', rec, 'slot', 'tok')
local last = tonumber(st[1] or '0')
local m = redis.call('GET', KEYS[3])
if not m or m_decode(m).hid ~= hid
    or redis.call('EXISTS', prefix_of(rec) .. K_LEASE .. sid_of(hid)) == 0 then
  return {not_holder, now, last}
end
local slot, tok = tonumber(ARGV[3]), tonumber(ARGV[2])
if slot <= last or tok <= tonumber(st[2] or '0') then
  return {done, now, last}
end
if slot > now then
  return {early, now, last}
end
local grace = tonumber(st[1] and ARGV[4] or ARGV[9])
if grace >= 0 and now - slot > grace then
  return {late, now, last}
end
if not st[1] then
  -- A slot run before Redis lost its data was claimed before the loss was
  -- noticed: the marker "<until>|<grace>" (epoch_init.lua) was written at
  -- until - grace, after the loss. "0": no loss since the namespace began.
  local v = redis.call('GET', KEYS[4]) or ''
  local untl = tonumber(string.match(v, '^(%d+)') or '0')
  local g = tonumber(string.match(v, '|(%d+)$') or '0')
  if untl ~= 0 and slot <= untl - g then
    return {lost_data, now, last}
  end
end
redis.call('HSET', rec, 'slot', ARGV[3], 'tok', ARGV[2], 'spec', ARGV[7], 'tz', ARGV[8])
redis.call('HSET', hist, ARGV[2], ARGV[3] .. '|' .. string.format('%.0f', now) .. '|0|'
  .. string.format('%.0f', last) .. '|0|' .. hid .. '|')
local toks = redis.call('HKEYS', hist)
local size = tonumber(ARGV[6])
if #toks > size then
  table.sort(toks, function(a, b) return tonumber(a) < tonumber(b) end)
  for i = 1, #toks - size do
    redis.call('HDEL', hist, toks[i])
  end
end
redis.call('PEXPIRE', rec, ARGV[5])
redis.call('PEXPIRE', hist, ARGV[5])
return {claimed, now, last}
