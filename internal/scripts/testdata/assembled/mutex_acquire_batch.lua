local R_GRANTED, R_BUSY, R_SLOW, K_LEASE, K_QUEUE = 1, 0, -9, "s:", "q:"
-- fastpath.lua: what the fast paths of scripts with a "--@helpers" line use;
-- first in those scripts and in the batch scripts only (see scripts.go,
-- batch.go), so it must stay small.

-- new_token returns the next fencing token after last (a stored token, or
-- false), as a string and as a number: max(last + 1, server time in µs),
-- the rule of next_token in common.lua. The clock is what keeps tokens
-- increasing when the stored token went back: a restart from an older
-- snapshot, a failover to a replica that missed writes. The string is built
-- from TIME's reply, so the common case formats no float. The clock is read
-- once per call: a batch script's tokens are of different mutexes, or
-- above the last one anyway.
local now_s, now_n
local function new_token(last)
  if not now_s then
    local t = redis.call('TIME')
    now_s = t[1] .. string.sub('00000' .. t[2], -6)
    now_n = tonumber(now_s)
  end
  if last then
    local l = tonumber(last) + 1
    if l > now_n then
      return string.format('%.0f', l), l
    end
  end
  return now_s, now_n
end
-- mutex_acquire_batch.lua: the fast path of mutex_acquire.lua for several
-- acquire attempts of one session at once (see batch.go): one call, one
-- read of the caller's lease and at most one TIME for all of them
-- (new_token, fastpath.lua), where each attempt alone would pay its own.
-- The fast path is spelled out again here, as in mutex_acquire.lua, for
-- speed; TestBatchScriptsMatchSingle keeps the two alike.
-- KEYS[1] the caller's lease {ns}:s:<sid>   KEYS[2..n+1] the mutexes
-- {ns}:m:<name>, one per attempt (two attempts may name the same mutex:
-- they run in order, as two calls of mutex_acquire.lua would)
-- ARGV[1] options "<held>|<ld>|<i>", as the tail of mutex_acquire.lua's
-- ARGV[2]   ARGV[2..n+1] "<queue><hid>" per attempt: queue "1" to queue
-- when busy, then the hold id
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

for i = 1, n do
  local a, m = ARGV[i + 1], KEYS[i + 1]
  local hid = string.sub(a, 2)
  local r = {R_SLOW}
  local v = not lease[i + 1] and redis.pcall('GET', m) -- an error (an older layout's hash) is slow
  if v == false and not lease[i + 1] then
    -- No mutex and no queue left (see mutex_acquire.lua): grant.
    if redis.call('EXISTS', p .. K_QUEUE .. 'm:' .. string.sub(m, #p + 3)) == 0 then
      local tok, tn = new_token(false)
      redis.call('SET', m, hid .. '|' .. tok .. tail .. '||', 'PX', held)
      r = {R_GRANTED, tn}
    end
  elseif type(v) == 'string' then
    local e = string.find(v, '|', 1, true)
    if e == 1 and string.sub(v, -2) == '||' then
      -- Free, no lock delay, nobody waiting: grant, as mutex_acquire.lua.
      local last = string.sub(v, 2, string.find(v, '|', 2, true) - 1)
      if last ~= '' then
        local tok, tn = new_token(last)
        redis.call('SET', m, hid .. '|' .. tok .. tail .. '||', 'PX', held)
        r = {R_GRANTED, tn}
      end
    else
      local holder = string.sub(v, 1, e - 1)
      if holder ~= '' and holder ~= hid then
        local wait = redis.call('PTTL', p .. K_LEASE .. string.match(holder, '^([^.]+)%.'))
        if wait > 0 then
          if string.sub(a, 1, 1) ~= '1' then
            r = {R_BUSY, wait, -1}
          else
            local q = p .. K_QUEUE .. 'm:' .. string.sub(m, #p + 3)
            local pos = redis.call('LPOS', q, hid)
            if not pos then
              pos = redis.call('RPUSH', q, hid) - 1
              if pos == 0 then
                redis.call('PEXPIRE', q, held)
              end
              if string.sub(v, -1) == '|' then
                redis.call('SET', m, v .. '1', 'KEEPTTL')
              end
            end
            r = {R_BUSY, wait, pos}
          end
        end
      end
    end
  end
  out[i] = r
end
return out
