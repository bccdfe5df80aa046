-- fastpath.lua: what the fast paths of scripts with a "--@helpers" line use;
-- first in those scripts and in the batch scripts only (see scripts.go,
-- batch.go), so it must stay small.

-- now_s: the server's clock in µs as a string, read at most once per call
-- by new_token.lua (inlined where a token is taken).
local now_s
