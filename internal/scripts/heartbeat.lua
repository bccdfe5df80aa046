-- heartbeat.lua (with epoch_lib.lua): renew a session lease, keep its
-- resources' keys alive, and report the holds taken away from it.
-- KEYS[1] lease {ns}:s:<sid>
-- ARGV[1] ttl ms   ARGV[2] prefix {ns}:   ARGV[3] keep ms   ARGV[4] n, the
-- number of revoked hold ids that follow   ARGV[5..4+n] revoked hold ids the
-- session has already handled   ARGV[5+n..] keys to keep alive: those of
-- holds whose expiry is due for renewal and of waits (see internal/lease)
-- Returns {1, "k" .. codes, replication id, server time ms, revoked hold
-- ids...} when renewed (see epoch_lib.lua repl_id; the session checks its
-- holds when the id changes, and logs a step of the server clock), codes holding
-- one character per key to keep: "1" when it now expires no sooner than keep
-- ms from now (or never), "0" when it does not exist, "e" when Redis
-- refused it; {0} when the lease no longer exists; {2} when it no longer
-- exists but Redis lost its data within the restart grace (the session may
-- reclaim); {-5} when the epoch marker is missing. Cost is O(1 + revoked +
-- keys): holds are valid only while their session's lease exists, so
-- renewing the lease renews them all; their keys need renewing only every
-- few heartbeats, as they are kept longer than the lease (see common.lua
-- held_ms).
-- It declares one key and runs without the migration probe (see Script):
-- while the namespace's slot migrates, Redis runs it wherever the lease is,
-- so holds outlive a slot move longer than the TTL. A key to keep that is
-- on the other node then answers "e" (or "0"): the session ends a hold
-- whose keys it cannot keep before they could expire. The only other key
-- it reads without declaring it, the epoch marker, it reads once the lease
-- is gone from the node that runs it, which during a move means gone from
-- both nodes: a marker that reads as absent there only sends the client to
-- recreate it (a probed script, which waits for the move to end).
--@include epoch_lib.lua
if redis.call('PEXPIRE', KEYS[1], ARGV[1]) == 0 then
  local grace = grace_left(ARGV[2])
  if grace < 0 then
    return {R_EPOCH_MISSING}
  elseif grace > 0 then
    return {HB_RECLAIMABLE}
  end
  return {HB_GONE}
end
local n = tonumber(ARGV[4]) or 0
local codes = {}
for i = 5 + n, #ARGV do
  local c = redis.pcall('PEXPIRE', ARGV[i], ARGV[3], 'GT')
  if c == 0 then
    -- Unless missing (-2), it already expires later, or never (-1).
    c = redis.pcall('PTTL', ARGV[i])
    if c ~= -2 and type(c) == 'number' then
      c = 1
    end
  end
  codes[#codes + 1] = (c == 1 and '1') or (c == -2 and '0') or 'e'
end
-- The codes as a string, also when empty or all digits (a reply string,
-- never a number).
local out = {HB_RENEWED, 'k' .. table.concat(codes), repl_id(), now_ms()}
local r = redis.call('HGET', KEYS[1], 'r')
if r then
  local acked = {}
  for i = 5, 4 + n do
    acked[ARGV[i]] = true
  end
  local left = ''
  for hid in string.gmatch(r, '[^|]+') do
    if not acked[hid] then
      out[#out + 1] = hid
      left = left .. '|' .. hid
    end
  end
  if left == '' then
    redis.call('HDEL', KEYS[1], 'r')
  elseif left ~= r then
    redis.call('HSET', KEYS[1], 'r', left)
  end
end
return out
