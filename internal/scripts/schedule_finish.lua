-- schedule_finish.lua: record the end of a scheduled job's run.
-- KEYS[1] job record {ns}:job:<name>   KEYS[2] job history {ns}:jobh:<name>
-- (see schedule_claim.lua)
-- ARGV[1] the run's token   ARGV[2] "1" when the run ended by the loss of
-- its hold, else "0"   ARGV[3] the error text, "" on success
-- ARGV[4] keep ms: the record and history live at least this long after
-- Returns 1 when the run's record was updated, 0 when it is gone (trimmed,
-- expired, or lost with the data). Only the run's own record is written.
local rec, hist = KEYS[1], KEYS[2]
local r = redis.call('HGET', hist, ARGV[1])
if not r then
  return 0
end
local slot, start, prev, hid = string.match(r, '^(%d+)|(%d+)|%d+|(%d+)|%d|([^|]*)|')
if not slot then
  return 0
end
redis.call('HSET', hist, ARGV[1], slot .. '|' .. start .. '|' .. string.format('%.0f', now_ms()) .. '|'
  .. prev .. '|' .. ARGV[2] .. '|' .. hid .. '|' .. ARGV[3])
keep_at_least(rec, tonumber(ARGV[4]))
keep_at_least(hist, tonumber(ARGV[4]))
return 1
