-- mutex_acquire.lua: grant the mutex if it is free and nobody waits before the
-- caller, else queue the caller FIFO (when asked to wait).
-- KEYS[1] mutex {ns}:m:<name>   KEYS[2] the caller's lease {ns}:s:<sid>;
-- the queue {ns}:q:m:<name> is built here when needed (see
-- mutex_release.lua: each declared key costs Redis work on every call)
-- ARGV[1] hold id   ARGV[2] options "<queue><sharded><held>|<ld>|<i>":
-- queue "1" to queue when busy ("2" for a hold id sent for the first time,
-- which no queue holds yet, so none is searched for it; "0" not to queue),
-- sharded "1" for sharded pub/sub, then the
-- caller's session's held_ms, lock delay and idle time in ms (see
-- common.lua; packed, and formatted by the client: every argument costs
-- Redis a string on every call, and every number the script formats or
-- parses costs it a printf or a strtod, and this script runs for every
-- lock)
-- Returns the bare token when its fast path grants (see parseAcquire), {1,
-- token} when the full path does (also when already granted to this hold
-- id, so a retry after a lost reply is safe); {0, wait ms, queue position or -1}
-- when not; {-8, grace ms} when not, during a restart grace, to a caller that
-- does not queue; {-1} when the caller's own lease is gone; {-5} when the
-- epoch marker is missing (see common.lua grace_left). A caller that does
-- not queue and finds the mutex held by a live session is told
-- {0, wait ms, -1} before anything else: its lease is not read.
-- A free mutex with live waiters is handed to the first of them here, so a
-- newcomer never overtakes a queue whose previous holder died.
local hid, m = ARGV[1], KEYS[1]

-- The fast path, before the helpers exist (see scripts.go): see
-- mutex_acquire_fast.lua, which reads the caller's lease before it grants
-- or queues (a failed TryLock reads none) and returns its reply. Anything
-- else takes the full path below, which reads everything again.
do
  local aq, ok, lk, p, held, tail = ARGV[2], nil, KEYS[2]
  --@inline mutex_acquire_fast.lua
end

--@helpers
--@include mutex_lib.lua
local p = prefix_of(m)
local queue, sharded = string.sub(ARGV[2], 1, 1), string.sub(ARGV[2], 2, 2)
local pos -- for busy: false when hid is surely in no queue
if queue == '2' then
  queue, pos = '1', false
end
local name = string.sub(m, #p + 3)
local q = p .. K_QUEUE .. 'm:' .. name
local stop, grace = check_caller(p, hid, queue)
if stop then
  return stop
end
local st = m_load(m)
if st.hid == hid then
  return {R_GRANTED, tonumber(st.tok)}
end
local free, wait = m_free(p, st)
if free and grace > 0 then
  free, wait = false, grace
end
if free then
  local nxt = first_live(p, q)
  if not nxt or nxt == hid then
    if nxt then
      redis.call('LPOP', q)
    end
    local tok = m_grant(p, st, hid)
    m_save(m, q, st)
    return {R_GRANTED, tok}
  end
  m_handoff(p, st, q, sharded, name)
  wait = lease_pttl(p, nxt)
  st.changed = true
end
local reply = busy(q, hid, wait, queue, grace, pos)
if queue == '1' then
  -- Queued: the waiter mark, and an idle time for a mutex created here (a
  -- waiter during a restart grace), so that it can expire.
  st.w, st.changed = true, true
  if not st.i then
    st.i = idle_ms(redis.call('HGET', p .. K_LEASE .. sid_of(hid), 'ttl'))
  end
end
if st.changed then
  m_save(m, q, st)
end
return reply
