-- schedule_read.lua: read a scheduled job's record, its history and who
-- runs it now.
-- KEYS[1] job record {ns}:job:<name>   KEYS[2] job history {ns}:jobh:<name>
-- (see schedule_claim.lua)   KEYS[3] the job's mutex {ns}:m:schedule:<name>
-- Returns {record as HGETALL, history as HGETALL, hold id holding the
-- mutex with a live lease or ""}.
--@include mutex_value.lua
local m = redis.call('GET', KEYS[3])
local hid = m and m_decode(m).hid or ''
if hid ~= '' and redis.call('EXISTS', prefix_of(KEYS[1]) .. K_LEASE .. (sid_of(hid) or '')) == 0 then
  hid = ''
end
return {redis.call('HGETALL', KEYS[1]), redis.call('HGETALL', KEYS[2]), hid}
