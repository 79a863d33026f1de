-- retry: bring dead jobs back to pending, all or nothing. attempts is kept (it only grows:
-- it is the fencing token), so a job retried after reaching the maximum goes back to dead on
-- its next failure unless the maximum is raised. One wake marker is pushed unless the queue is
-- paused. The failure history (FORMAT failure) is kept: it tells why the job died.
--
-- KEYS[1]  emq:{<q>}:dead               score-0 set
-- KEYS[2]  emq:{<q>}:pending            score-0 set
-- KEYS[3]  emq:{<q>}:meta               hash; read: paused
-- KEYS[4]  emq:{<q>}:wake               list of wake-up markers (FORMAT wake)
-- ARGV[1]  id*  jobid                   a starred ARGV repeats: one JOB id per job (one at
--          least), each a dead job of the queue, no id twice
-- DERIVES  emq:{<q>}:job:<id>           each job's row: KEYS[1] up to its type, "job:", the id
-- FORMAT   jobid    see enqueue.lua
-- FORMAT   wake     see enqueue.lua
-- FORMAT   failure  see fail.lua
-- REPLY    the number of jobs moved to pending (an integer)
-- ERROR    EMQNOJOB   <id>: a job has no row
-- ERROR    EMQSTATE   <state> <id>: a job is not dead (nothing written)
-- ERROR    EMQKEYS    the KEYS are not one queue's dead, pending, meta, wake
-- ERROR    EMQARGS    an id is not a JOB id or repeats, or no id is given
-- ERROR    EMQTYPE    a key holds another type
local base = string.match(KEYS[1] or '', '^(emq:{[0-9A-Za-z_.%-]+}:)dead$')
if #KEYS ~= 4 or not base or #base > 71 or KEYS[2] ~= base .. 'pending' or KEYS[3] ~= base .. 'meta' or KEYS[4] ~= base .. 'wake' then
  return redis.error_reply('EMQKEYS expected emq:{<q>}:dead, pending, meta, wake of one queue')
end
if #ARGV < 1 then return redis.error_reply('EMQARGS expected one JOB id at least') end
local function typeerr(key, got, want)
  if got ~= 'none' and got ~= want then return 'EMQTYPE ' .. key .. ' holds a ' .. got .. ', not a ' .. want end
end
local e = typeerr(KEYS[1], redis.call('TYPE', KEYS[1])['ok'], 'zset')
  or typeerr(KEYS[2], redis.call('TYPE', KEYS[2])['ok'], 'zset')
  or typeerr(KEYS[3], redis.call('TYPE', KEYS[3])['ok'], 'hash')
  or typeerr(KEYS[4], redis.call('TYPE', KEYS[4])['ok'], 'list')
if e then return redis.error_reply(e) end
local seen = {}
for i, id in ipairs(ARGV) do
  if #id ~= 30 or not string.match(id, '^JOB_[0-7][0-9A-HJKMNP-TV-Z]+$') then
    return redis.error_reply('EMQARGS ARGV[' .. i .. '] is not a JOB id')
  end
  if seen[id] then return redis.error_reply('EMQARGS ARGV[' .. i .. '] repeats id ' .. id) end
  seen[id] = true
  local jk = base .. 'job:' .. id
  e = typeerr(jk, redis.call('TYPE', jk)['ok'], 'hash')
  if e then return redis.error_reply(e) end
  local state = redis.call('HGET', jk, 'state')
  if not state then return redis.error_reply('EMQNOJOB ' .. id) end
  if state ~= 'dead' then return redis.error_reply('EMQSTATE ' .. state .. ' ' .. id) end
end
for _, id in ipairs(ARGV) do
  local jk = base .. 'job:' .. id
  redis.call('ZREM', KEYS[1], id)
  redis.call('HSET', jk, 'state', 'pending')
  redis.call('ZADD', KEYS[2], 0, id)
end
if redis.call('HGET', KEYS[3], 'paused') ~= '1' then
  redis.call('LPUSH', KEYS[4], '1')
  redis.call('LTRIM', KEYS[4], 0, 15)
end
return #ARGV
