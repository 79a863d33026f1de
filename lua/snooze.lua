-- snooze: hand a claimed job back without counting it as a failure: to schedule at server
-- TIME + delay_ms, or to pending at once when delay_ms is 0. It is never sent to dead.
--
-- Fenced like complete (FORMAT fencing). attempts is kept (it never goes down), so the next
-- claim mints token + 1; note that attempts counts claims, so a later fail measures the
-- queue's maximum against claims, snoozes included. A job that goes to pending pushes a wake
-- marker unless the queue is paused.
--
-- KEYS[1]  emq:{<q>}:active             scored by lease deadline (FORMAT lease)
-- KEYS[2]  emq:{<q>}:schedule           scored by run-at (ms, server clock)
-- KEYS[3]  emq:{<q>}:pending            score-0 set
-- KEYS[4]  emq:{<q>}:meta               hash; read: paused
-- KEYS[5]  emq:{<q>}:wake               list of wake-up markers (FORMAT wake)
-- ARGV[1]  id        jobid                    the job's JOB id
-- ARGV[2]  token     fence                    the attempts count the claim returned
-- ARGV[3]  delay_ms  uint[0,999999999999999]  run-at = server TIME + delay_ms; 0 = pending now
-- DERIVES  emq:{<q>}:job:<id>           the job's row: KEYS[1] up to its type, "job:", the id
-- FORMAT   jobid    see enqueue.lua
-- FORMAT   servertime  see claim.lua
-- FORMAT   fencing  see complete.lua
-- FORMAT   wake     see enqueue.lua
-- FORMAT   lease    see claim.lua
-- REPLY    {where, at_ms}: where is "scheduled" (at_ms = run-at) or "pending" (at_ms = server
--          TIME)
-- ERROR    EMQSTALE   no row | not active | token mismatch (FORMAT fencing; nothing written)
-- ERROR    EMQKEYS    the KEYS are not one queue's active, schedule, pending, meta, wake
-- ERROR    EMQARGS    an ARGV does not meet its rule, or the count of ARGV is not 3
-- ERROR    EMQTYPE    a key holds another type
local base = string.match(KEYS[1] or '', '^(emq:{[0-9A-Za-z_.%-]+}:)active$')
if #KEYS ~= 5 or not base or #base > 71 or KEYS[2] ~= base .. 'schedule' or KEYS[3] ~= base .. 'pending' or KEYS[4] ~= base .. 'meta'
  or KEYS[5] ~= base .. 'wake' then
  return redis.error_reply('EMQKEYS expected emq:{<q>}:active, schedule, pending, meta, wake of one queue')
end
if #ARGV ~= 3 then return redis.error_reply('EMQARGS expected 3 ARGV: id, token, delay_ms') end
local id, token, delay = ARGV[1], ARGV[2], ARGV[3]
if #id ~= 30 or not string.match(id, '^JOB_[0-7][0-9A-HJKMNP-TV-Z]+$') then
  return redis.error_reply('EMQARGS ARGV[1] is not a JOB id')
end
if #token > 15 or not string.match(token, '^[1-9][0-9]*$') then
  return redis.error_reply('EMQARGS ARGV[2] token must be an integer in [1, 999999999999999]')
end
if #delay > 15 or not string.match(delay, '^[0-9]+$') then
  return redis.error_reply('EMQARGS delay_ms must be an integer in [0, 999999999999999]')
end
delay = tonumber(delay)
local function typeerr(key, got, want)
  if got ~= 'none' and got ~= want then return 'EMQTYPE ' .. key .. ' holds a ' .. got .. ', not a ' .. want end
end
local e = typeerr(KEYS[1], redis.call('TYPE', KEYS[1])['ok'], 'zset')
  or typeerr(KEYS[2], redis.call('TYPE', KEYS[2])['ok'], 'zset')
  or typeerr(KEYS[3], redis.call('TYPE', KEYS[3])['ok'], 'zset')
  or typeerr(KEYS[4], redis.call('TYPE', KEYS[4])['ok'], 'hash')
  or typeerr(KEYS[5], redis.call('TYPE', KEYS[5])['ok'], 'list')
if e then return redis.error_reply(e) end
local jk = base .. 'job:' .. id
local kind = redis.call('TYPE', jk)['ok']
if kind == 'none' then return redis.error_reply('EMQSTALE no row') end
if kind ~= 'hash' then return redis.error_reply('EMQTYPE ' .. jk .. ' holds a ' .. kind .. ', not a hash') end
local row = redis.call('HMGET', jk, 'state', 'attempts')
if row[1] ~= 'active' then return redis.error_reply('EMQSTALE not active') end
if row[2] ~= token then return redis.error_reply('EMQSTALE token mismatch') end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZREM', KEYS[1], id)
if delay == 0 then
  redis.call('HSET', jk, 'state', 'pending')
  redis.call('ZADD', KEYS[3], 0, id)
  if redis.call('HGET', KEYS[4], 'paused') ~= '1' then
    redis.call('LPUSH', KEYS[5], '1')
    redis.call('LTRIM', KEYS[5], 0, 15)
  end
  return {'pending', now}
end
redis.call('HSET', jk, 'state', 'scheduled')
redis.call('ZADD', KEYS[2], now + delay, id)
return {'scheduled', now + delay}
