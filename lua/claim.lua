-- claim: pop the lex-oldest pending job, mint its fencing token, lease it on the server clock.
--
-- The seed's claim (R0.2.3 §2). One departure, made on purpose: the job-row prefix is derived
-- from KEYS[1] by the grammar instead of being passed in ARGV, so no caller can point the
-- script at a row outside the queue's hash tag.
--
-- KEYS[1]  emq:{<q>}:pending       score-0 set; lex order is mint order
-- KEYS[2]  emq:{<q>}:active        scored by lease deadline (ms, server clock)
-- ARGV[1]  lease_ms                lease length in milliseconds, an integer > 0
-- DERIVES  emq:{<q>}:job:<id>      the popped job's row: KEYS[1] up to its type, "job:", the id
-- REPLY    {} when pending is empty; else {id, payload, attempts}: the JOB id, the payload
--          bytes, and the new attempts count, which is the fencing token of this claim
-- ERRORS   EMQKEYS when KEYS[1] is not a queue key
local base = string.match(KEYS[1], '^emq:{[^}]+}:')
if not base then return redis.error_reply('EMQKEYS KEYS[1] is not a queue key') end
local popped = redis.call('ZPOPMIN', KEYS[1])
if #popped == 0 then return {} end
local id = popped[1]
local jk = base .. 'job:' .. id
local att = redis.call('HINCRBY', jk, 'attempts', 1)
redis.call('HSET', jk, 'state', 'active')
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[1]), id)
return {id, redis.call('HGET', jk, 'payload'), att}
