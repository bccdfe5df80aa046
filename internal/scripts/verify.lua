-- verify.lua (with mutex_lib.lua): report which of a session's holds Redis
-- no longer records. A session runs it when the replication id its
-- heartbeat reports changed (see epoch_lib.lua repl_id): a replica was
-- promoted, or the server restarted. Without ReplicaAck, the promoted
-- replica may miss grants that the old master made (or that the session's
-- client was still making there); such a hold must end before its holder
-- takes its next step as if it held it, while another session is granted
-- the same resource by the new master.
-- KEYS[1] lease {ns}:s:<sid>
-- ARGV[1] prefix {ns}:   ARGV[2..] groups of 4 (see reclaim.lua): kind
-- ("m" "sem" "pool" "el" "rw"), name, hold id, extra (pool: the member
-- held; rwmutex: "r" for a read hold, "w" for a write one)
-- Returns {hold ids not recorded...}; every hold is unrecorded when the
-- lease is gone (the heartbeat reports that on its own).
--@include mutex_lib.lua
local p = ARGV[1]
local alive = redis.call('EXISTS', KEYS[1]) == 1
local lost = {}
for i = 2, #ARGV, 4 do
  local kind, name, hid, extra = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local ok = false
  if alive then
    if kind == 'm' then
      ok = m_load(p .. K_MUTEX .. name).hid == hid
    elseif kind == 'el' then
      ok = redis.call('HGET', p .. K_ELECTION .. name, 'hid') == hid
    elseif kind == 'sem' then
      ok = redis.call('HEXISTS', p .. K_SEMAPHORE_HOLDERS .. name, hid) == 1
    elseif kind == 'pool' then
      ok = redis.call('HGET', p .. K_POOL .. name .. ':h', extra) == hid
    elseif kind == 'rw' then
      if extra == 'r' then
        ok = redis.call('HEXISTS', p .. K_RWMUTEX_READERS .. name, hid) == 1
      else
        ok = redis.call('HGET', p .. K_RWMUTEX .. name, 'w') == hid
      end
    end
  end
  if not ok then
    lost[#lost + 1] = hid
  end
end
return lost
