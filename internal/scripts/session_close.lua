-- session_close.lua: delete a session lease; its remaining holds become free.
-- KEYS[1] lease {ns}:s:<sid>   KEYS[2] revoked set {ns}:r:<sid>
-- Returns the number of keys deleted.
return redis.call('DEL', KEYS[1], KEYS[2])
