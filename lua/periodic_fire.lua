-- periodic_fire: fire or skip one tick of a periodic schedule; the tick is the fence.
--
-- Any number of schedulers compute a schedule's due ticks from the server's clock and call this
-- for each. Only a tick newer than the row's last (the newest tick fired or skipped, or the
-- declaration) does anything, so each tick enqueues at most one job however many processes
-- fire it. A fire enqueues the job exactly as enqueue does (a row of exactly three fields: state
-- pending, attempts 0, the schedule's payload; the id into pending; one wake marker unless the
-- queue is paused) and moves last to the tick; a skip only moves last, so a policy can pass
-- over missed ticks. A paused schedule fires nothing and keeps last. Every check runs before the
-- first write, so a refused call writes nothing.
--
-- KEYS[1]  emq:{<q>}:periodic:<name>    the schedule's row (FORMAT periodic)
-- KEYS[2]  emq:{<q>}:pending            score-0 set; lex order is mint order
-- KEYS[3]  emq:{<q>}:meta               hash; read: paused = "1" suppresses the wake marker
-- KEYS[4]  emq:{<q>}:wake               list of wake-up markers (FORMAT wake)
-- ARGV[1]  tick_ms  uint[0,999999999999999]  the tick in unix ms; it must not be later than
--          the server's TIME (FORMAT servertime)
-- ARGV[2]  job_id   jobid  the JOB id of the tick's job, checked on a skip too; clients mint
--          it from the queue, the name and the tick, so it is the same everywhere (FORMAT
--          periodic)
-- ARGV[3]  fire     uint[0,1]  1 fires the tick (its job is enqueued), 0 skips it (only last
--          moves)
-- DERIVES  emq:{<q>}:job:<id>           the tick's job row: KEYS[1] up to its type, "job:", job_id
-- FORMAT   periodic see periodic_upsert.lua
-- FORMAT   jobid    see enqueue.lua
-- FORMAT   envelope see enqueue.lua
-- FORMAT   servertime  see claim.lua
-- FORMAT   wake     see enqueue.lua
-- REPLY    1 when the tick fired (the job was enqueued), 2 when it was skipped (last moved), 0
--          when nothing was written: the tick is not newer than last (fired or skipped already,
--          by this caller or another: the fence), or the schedule is paused
-- ERROR    EMQKEYS    the KEYS are not one schedule row and its queue's pending, meta, wake
-- ERROR    EMQARGS    an ARGV does not meet its rule, the count is not 3, or tick_ms is later
--          than the server's TIME
-- ERROR    EMQNOSCHED <name>: the schedule has no row
-- ERROR    EMQEXISTS  a fire of a tick newer than last finds a job row with job_id
-- ERROR    EMQTYPE    a key (or the job row) holds another type, or the row holds no integer
--          last or no payload
local base, name = string.match(KEYS[1] or '', '^(emq:{[0-9A-Za-z_.%-]+}:)periodic:([0-9A-Za-z_.%-]+)$')
if #KEYS ~= 4 or not base or #base > 71 or #name > 64 or KEYS[2] ~= base .. 'pending' or KEYS[3] ~= base .. 'meta'
  or KEYS[4] ~= base .. 'wake' then
  return redis.error_reply('EMQKEYS expected emq:{<q>}:periodic:<name>, pending, meta, wake of one queue')
end
local function uint(s, hi)
  if #s <= 15 and string.match(s, '^[0-9]+$') and tonumber(s) <= hi then return tonumber(s) end
end
if #ARGV ~= 3 then return redis.error_reply('EMQARGS expected 3 ARGV: tick_ms, job_id, fire') end
local tick, id, fire = uint(ARGV[1], 999999999999999), ARGV[2], uint(ARGV[3], 1)
if not tick then return redis.error_reply('EMQARGS tick_ms must be an integer in [0, 999999999999999]') end
if #id ~= 30 or not string.match(id, '^JOB_[0-7][0-9A-HJKMNP-TV-Z]+$') then
  return redis.error_reply('EMQARGS ARGV[2] is not a JOB id')
end
if not fire then return redis.error_reply('EMQARGS fire must be 1 (fire) or 0 (skip)') end
local function typeerr(key, got, want)
  if got ~= 'none' and got ~= want then return 'EMQTYPE ' .. key .. ' holds a ' .. got .. ', not a ' .. want end
end
local e = typeerr(KEYS[1], redis.call('TYPE', KEYS[1])['ok'], 'hash')
  or typeerr(KEYS[2], redis.call('TYPE', KEYS[2])['ok'], 'zset')
  or typeerr(KEYS[3], redis.call('TYPE', KEYS[3])['ok'], 'hash')
  or typeerr(KEYS[4], redis.call('TYPE', KEYS[4])['ok'], 'list')
if e then return redis.error_reply(e) end
if redis.call('EXISTS', KEYS[1]) == 0 then return redis.error_reply('EMQNOSCHED ' .. name) end
local row = redis.call('HMGET', KEYS[1], 'last', 'payload', 'paused')
local last = row[1] and uint(row[1], 999999999999999)
if not last then return redis.error_reply('EMQTYPE ' .. KEYS[1] .. ' holds no integer last') end
if not row[2] then return redis.error_reply('EMQTYPE ' .. KEYS[1] .. ' holds no payload') end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
if tick > now then
  return redis.error_reply('EMQARGS tick_ms ' .. tick .. ' is later than the server time ' .. now)
end
if row[3] == '1' or tick <= last then return 0 end
local jk = base .. 'job:' .. id
if fire == 1 then
  e = typeerr(jk, redis.call('TYPE', jk)['ok'], 'hash')
  if e then return redis.error_reply(e) end
  if redis.call('EXISTS', jk) == 1 then return redis.error_reply('EMQEXISTS ' .. jk .. ' exists') end
end
-- The writes.
redis.call('HSET', KEYS[1], 'last', tick)
if fire == 0 then return 2 end
redis.call('HSET', jk, 'state', 'pending', 'attempts', 0, 'payload', row[2])
redis.call('ZADD', KEYS[2], 0, id)
if redis.call('HGET', KEYS[3], 'paused') ~= '1' then
  redis.call('LPUSH', KEYS[4], '1')
  redis.call('LTRIM', KEYS[4], 0, 15)
end
return 1
