-- rwmutex_serve.lua: how a read-write mutex's queue is served, the one
-- home of its order, as statement text inlined where it runs (--@inline,
-- see assemble.go): by rw_serve (rwmutex_lib.lua) on the full paths, and
-- by the closure-free hand-off of rwmutex_release.lua's fast path.
-- The head of queue q is granted in order, as far as it can be now:
-- readers while no writer holds (consecutive readers all in one go), a
-- writer only when nobody holds and no lost reader's lock delay runs; it
-- stops at the first entry it cannot grant, so a queued writer keeps later
-- readers out. Dead waiters (their lease, which always has 'ld', is gone)
-- are dropped. Each grant writes what a grant writes (the holder, the
-- token, 'i', the expiries at least held_ms, see common.lua) and is
-- announced with the grant message (grant_message.lua), except self's.
-- The includer has checked that no restart grace is pending, that no
-- writer holds and that no lock delay keeps everyone out. It sets p, k, r,
-- q, sharded ("1" for sharded pub/sub), name, self (the caller's own
-- entry, or nil), readers (whether a live reader holds), delay_w (the ms
-- of a lost reader's lock delay left, which keeps writers out) and last
-- (k's stored token, or false), and declares mine (self's token, a number,
-- when granted), granted (0: how many it granted) and emptied (whether it
-- found the queue empty).
local tok, n
while true do
  local e = redis.call('LINDEX', q, '0')
  if not e then
    emptied = true
    break
  end
  local to, mode = string.match(e, '^(.+)|([rw])$')
  local sid = string.match(to, P_HOLD_SID)
  local l = redis.call('HMGET', p .. K_LEASE .. sid, 'ld', 'ttl')
  if not l[1] then
    redis.call('LPOP', q) -- a dead waiter
  elseif mode == 'w' and (readers or delay_w > 0) then
    break
  else
    redis.call('LPOP', q)
    if tok then
      n = n + 1
      tok = string.format('%.0f', n)
    else
      --@inline new_token.lua
    end
    local held = 2 * l[2] + l[1]
    if mode == 'w' then
      redis.call('HSET', k, 'w', to, 'wld', l[1], 'tok', tok, 'i', 2 * l[2])
    else
      redis.call('HSET', r, to, l[1] .. ':' .. tok)
      redis.call('HSET', k, 'tok', tok, 'i', 2 * l[2])
      if redis.call('PEXPIRE', r, held, 'NX') == 0 then
        redis.call('PEXPIRE', r, held, 'GT')
      end
    end
    if redis.call('PEXPIRE', k, held, 'NX') == 0 then
      redis.call('PEXPIRE', k, held, 'GT')
    end
    granted = granted + 1
    if e == self then
      mine = n
    else
      local res = name
      --@inline grant_message.lua
      redis.call(sharded == '1' and 'SPUBLISH' or 'PUBLISH', p .. K_CHANNEL .. sid, msg)
    end
    if mode == 'w' then
      break
    end
    readers = true
  end
end
