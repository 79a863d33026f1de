-- promote: move due scheduled jobs (run-at <= server TIME) to pending, oldest run-at first,
-- at most limit of them.
--
-- Atomic, so any number of processes may run it at once: each due job moves exactly once. An
-- id whose row is missing or is not a hash cannot be worked: it is dropped from schedule and
-- not reported. When a job moved and the queue is not paused, one wake marker is pushed.
--
-- KEYS[1]  emq:{<q>}:schedule           scored by run-at (ms, server clock)
-- KEYS[2]  emq:{<q>}:pending            score-0 set
-- KEYS[3]  emq:{<q>}:meta               hash; read: paused
-- KEYS[4]  emq:{<q>}:wake               list of wake-up markers (FORMAT wake)
-- ARGV[1]  limit  uint[1,999999999999999]  how many jobs to move at most. The Go bus passes
--          PromoteOpts.Limit, else 100
-- DERIVES  emq:{<q>}:job:<id>           each job's row: KEYS[1] up to its type, "job:", the id
-- FORMAT   jobid    see enqueue.lua
-- FORMAT   servertime  see claim.lua
-- FORMAT   wake     see enqueue.lua
-- REPLY    {id, ...}: the JOB ids moved to pending, oldest run-at first; {} when none was due
-- ERROR    EMQKEYS    the KEYS are not one queue's schedule, pending, meta, wake
-- ERROR    EMQARGS    limit does not meet its rule, or the count of ARGV is not 1
-- ERROR    EMQTYPE    a key holds another type
local base = string.match(KEYS[1] or '', '^(emq:{[0-9A-Za-z_.%-]+}:)schedule$')
if #KEYS ~= 4 or not base or #base > 71 or KEYS[2] ~= base .. 'pending' or KEYS[3] ~= base .. 'meta' or KEYS[4] ~= base .. 'wake' then
  return redis.error_reply('EMQKEYS expected emq:{<q>}:schedule, pending, meta, wake of one queue')
end
if #ARGV ~= 1 then return redis.error_reply('EMQARGS expected 1 ARGV: limit') end
local limit = ARGV[1]
if #limit > 15 or not string.match(limit, '^[0-9]+$') or tonumber(limit) < 1 then
  return redis.error_reply('EMQARGS limit must be an integer in [1, 999999999999999]')
end
local function typeerr(key, got, want)
  if got ~= 'none' and got ~= want then return 'EMQTYPE ' .. key .. ' holds a ' .. got .. ', not a ' .. want end
end
local e = typeerr(KEYS[1], redis.call('TYPE', KEYS[1])['ok'], 'zset')
  or typeerr(KEYS[2], redis.call('TYPE', KEYS[2])['ok'], 'zset')
  or typeerr(KEYS[3], redis.call('TYPE', KEYS[3])['ok'], 'hash')
  or typeerr(KEYS[4], redis.call('TYPE', KEYS[4])['ok'], 'list')
if e then return redis.error_reply(e) end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(limit))
local moved = {}
for _, id in ipairs(due) do
  redis.call('ZREM', KEYS[1], id)
  local jk = base .. 'job:' .. id
  if redis.call('TYPE', jk)['ok'] == 'hash' then
    redis.call('HSET', jk, 'state', 'pending')
    redis.call('ZADD', KEYS[2], 0, id)
    moved[#moved + 1] = id
  end
end
if #moved > 0 and redis.call('HGET', KEYS[3], 'paused') ~= '1' then
  redis.call('LPUSH', KEYS[4], '1')
  redis.call('LTRIM', KEYS[4], 0, 15)
end
return moved
