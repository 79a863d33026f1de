-- due: how long until a queue's earliest scheduled job falls due, on the server's clock.
-- Writes nothing.
--
-- An idle worker reads it to wake at the run-at instead of polling: the wait is computed
-- inside the server from its own TIME, so no client clock takes part.
--
-- KEYS[1]  emq:{<q>}:schedule           scored by run-at (ms, server clock)
-- FORMAT   jobid    see enqueue.lua
-- FORMAT   servertime  see claim.lua
-- REPLY    {} when schedule is empty; else {id, wait_ms}: the JOB id with the lowest run-at
--          and how many ms (an integer) from the server's TIME until that run-at (0 when it is
--          due)
-- ERROR    EMQKEYS    KEYS[1] is not a queue's schedule
-- ERROR    EMQARGS    an ARGV is given
-- ERROR    EMQTYPE    the key holds another type
local base = string.match(KEYS[1] or '', '^(emq:{[0-9A-Za-z_.%-]+}:)schedule$')
if #KEYS ~= 1 or not base or #base > 71 then return redis.error_reply('EMQKEYS expected emq:{<q>}:schedule') end
if #ARGV ~= 0 then return redis.error_reply('EMQARGS expected no ARGV') end
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'zset' then return redis.error_reply('EMQTYPE ' .. KEYS[1] .. ' holds a ' .. kind .. ', not a zset') end
local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if #head == 0 then return {} end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local wait = tonumber(head[2]) - now
if wait < 0 then wait = 0 end
return {head[1], wait}
