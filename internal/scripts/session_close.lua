-- session_close.lua: delete a session lease; its remaining holds become free.
-- KEYS[1] lease {ns}:s:<sid>
-- Returns the number of keys deleted.
return redis.call('DEL', KEYS[1])
