-- grant_message.lua: the grant message "g|<hid>|<token>|<resource>", the
-- one encoder of it (internal/lease decodes it): statement text inlined
-- where a grant is published, by notify (common.lua) and by the
-- closure-free hand-offs of mutex_release_fast.lua and rwmutex_release.lua.
-- The includer names the grantee's hold id to, the token tok (a string)
-- and the resource res; msg is the message.
local msg = 'g|' .. to .. '|' .. tok .. '|' .. res
