-- periodic_fire: fire or skip one tick of a periodic schedule; the tick is the fence.
--
-- Any number of schedulers compute a schedule's due ticks from the server's clock and call this
-- for each. Only a tick newer than the row's last (the newest tick fired or skipped, or the
-- declaration) does anything, so each tick enqueues at most one job however many processes
-- fire it. mode "fire" enqueues the job exactly as enqueue does (a row of exactly three fields:
-- state pending, attempts 0, the schedule's payload; the id into pending; one wake marker unless
-- the queue is paused) and moves last to the tick; mode "skip" only moves last, so a policy can
-- pass over missed ticks. A paused schedule fires nothing and keeps last. Every check runs before
-- the first write.
--
-- KEYS[1]  emq:{<q>}:periodic:<name>    hash: spec, payload, last (unix ms), paused
-- KEYS[2]  emq:{<q>}:pending            score-0 set; lex order is mint order
-- KEYS[3]  emq:{<q>}:meta               hash; read: paused = "1" suppresses the wake marker
-- KEYS[4]  emq:{<q>}:wake               list of wake-up markers (the value "1"), at most 16
-- ARGV[1]  tick_ms                      the tick, unix ms (an integer of at most 15 digits), not
--          later than the server's TIME
-- ARGV[2]  job_id                       the JOB id of the tick's job (checked in both modes);
--          clients mint it from the queue, the name and the tick, so it is the same everywhere
-- ARGV[3]  mode                         "fire" or "skip"
-- DERIVES  emq:{<q>}:job:<id>           the tick's job row: KEYS[1] up to its type, "job:", job_id
-- REPLY    1 when the tick fired (the job was enqueued), 2 when it was skipped (last moved), 0
--          when nothing was written: the tick is not newer than last (fired or skipped already,
--          by this caller or another: the fence), or the schedule is paused
-- ERRORS   EMQNOSCHED <name> when the schedule has no row; EMQKEYS when the KEYS are not one
--          queue's periodic:<name>, pending, meta, wake; EMQARGS when an ARGV is not as declared
--          or tick_ms is later than the server's TIME; EMQEXISTS when the tick is newer than
--          last and a job row with job_id exists (mode fire); EMQTYPE when a key holds another
--          type or the row holds no integer last or no payload
local base = string.match(KEYS[1], '^(emq:{[%w_.%-]+}:)periodic:[%w_.%-]+$')
if not base or #base > 71 or #KEYS[1] - #base - 9 > 64 or KEYS[2] ~= base .. 'pending' or KEYS[3] ~= base .. 'meta' or KEYS[4] ~= base .. 'wake' then
  return redis.error_reply('EMQKEYS expected emq:{<q>}:periodic:<name>, pending, meta, wake of one queue')
end
local name = string.sub(KEYS[1], #base + 10)
local function uint(s)
  if #s <= 15 and string.match(s, '^%d+$') then return tonumber(s) end
end
if #ARGV ~= 3 then return redis.error_reply('EMQARGS expected tick_ms, job_id, mode') end
local tick, id, mode = uint(ARGV[1]), ARGV[2], ARGV[3]
if not tick then return redis.error_reply('EMQARGS tick_ms must be an integer >= 0 of at most 15 digits') end
if #id ~= 30 or not string.match(id, '^JOB_[0-7][0-9A-HJKMNP-TV-Z]+$') then
  return redis.error_reply('EMQARGS ARGV[2] is not a JOB id')
end
if mode ~= 'fire' and mode ~= 'skip' then return redis.error_reply('EMQARGS mode must be fire or skip') end
local function typeerr(key, got, want)
  if got ~= 'none' and got ~= want then return 'EMQTYPE ' .. key .. ' holds a ' .. got .. ', not a ' .. want end
end
local jk = base .. 'job:' .. id
local e = typeerr(KEYS[1], redis.call('TYPE', KEYS[1])['ok'], 'hash')
  or typeerr(KEYS[2], redis.call('TYPE', KEYS[2])['ok'], 'zset')
  or typeerr(KEYS[3], redis.call('TYPE', KEYS[3])['ok'], 'hash')
  or typeerr(KEYS[4], redis.call('TYPE', KEYS[4])['ok'], 'list')
if e then return redis.error_reply(e) end
local row = redis.call('HMGET', KEYS[1], 'last', 'payload', 'paused')
if redis.call('EXISTS', KEYS[1]) == 0 then return redis.error_reply('EMQNOSCHED ' .. name) end
local last = row[1] and uint(row[1])
if not last then return redis.error_reply('EMQTYPE ' .. KEYS[1] .. ' holds no integer last') end
if not row[2] then return redis.error_reply('EMQTYPE ' .. KEYS[1] .. ' holds no payload') end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
if tick > now then
  return redis.error_reply('EMQARGS tick_ms ' .. tick .. ' is later than the server time ' .. now)
end
if row[3] == '1' or tick <= last then return 0 end
if mode == 'skip' then
  redis.call('HSET', KEYS[1], 'last', tick)
  return 2
end
e = typeerr(jk, redis.call('TYPE', jk)['ok'], 'hash')
if e then return redis.error_reply(e) end
if redis.call('EXISTS', jk) == 1 then return redis.error_reply('EMQEXISTS ' .. jk .. ' exists') end
-- The writes.
redis.call('HSET', jk, 'state', 'pending', 'attempts', 0, 'payload', row[2])
redis.call('ZADD', KEYS[2], 0, id)
if redis.call('HGET', KEYS[3], 'paused') ~= '1' then
  redis.call('LPUSH', KEYS[4], '1')
  redis.call('LTRIM', KEYS[4], 0, 15)
end
redis.call('HSET', KEYS[1], 'last', tick)
return 1
