-- counts: read a queue's state in one atomic snapshot. Writes nothing.
--
-- KEYS[1]  emq:{<q>}:pending            score-0 set
-- KEYS[2]  emq:{<q>}:active             scored by lease deadline (FORMAT lease)
-- KEYS[3]  emq:{<q>}:schedule           scored by run-at (ms, server clock)
-- KEYS[4]  emq:{<q>}:dead               score-0 set
-- KEYS[5]  emq:{<q>}:meta               hash; read: paused, max_attempts, dead_max
-- DERIVES  emq:{<q>}:flow               read: field waiting (FORMAT lanes)
-- DERIVES  emq:{<q>}:urgent             read: its size
-- DERIVES  emq:{<q>}:laneready          read: its size
-- DERIVES  emq:{<q>}:lanewait           read: its size
-- DERIVES  emq:{<q>}:laneactive         read: how many lanes have claimed jobs
-- FORMAT   lease    see claim.lua
-- FORMAT   lanes    see laneclaim.lua
-- FORMAT   deadmax  see configure.lua
-- REPLY    {pending, active, scheduled, dead, paused, max_attempts, lane_waiting, urgent,
--          lanes_ready, lanes_held, lanes_active, dead_max}: the four set sizes, paused 1 or 0,
--          the queue's max_attempts (0 when it has none); then the jobs waiting in the lanes'
--          sets (flow field waiting), the size of urgent, the lanes in laneready and in
--          lanewait, and the lanes with claimed jobs; then the queue's dead_max (FORMAT
--          deadmax; 0 when it has none); all integers. The queue's waiting jobs are pending +
--          lane_waiting + urgent
-- ERROR    EMQKEYS    the KEYS are not one queue's pending, active, schedule, dead, meta
-- ERROR    EMQARGS    an ARGV is given
-- ERROR    EMQTYPE    a key holds another type
local base = string.match(KEYS[1] or '', '^(emq:{[0-9A-Za-z_.%-]+}:)pending$')
if #KEYS ~= 5 or not base or #base > 71 or KEYS[2] ~= base .. 'active' or KEYS[3] ~= base .. 'schedule' or KEYS[4] ~= base .. 'dead'
  or KEYS[5] ~= base .. 'meta' then
  return redis.error_reply('EMQKEYS expected emq:{<q>}:pending, active, schedule, dead, meta of one queue')
end
if #ARGV ~= 0 then return redis.error_reply('EMQARGS expected no ARGV') end
local function typeerr(key, got, want)
  if got ~= 'none' and got ~= want then return 'EMQTYPE ' .. key .. ' holds a ' .. got .. ', not a ' .. want end
end
local e = typeerr(KEYS[1], redis.call('TYPE', KEYS[1])['ok'], 'zset')
  or typeerr(KEYS[2], redis.call('TYPE', KEYS[2])['ok'], 'zset')
  or typeerr(KEYS[3], redis.call('TYPE', KEYS[3])['ok'], 'zset')
  or typeerr(KEYS[4], redis.call('TYPE', KEYS[4])['ok'], 'zset')
  or typeerr(KEYS[5], redis.call('TYPE', KEYS[5])['ok'], 'hash')
  or typeerr(base .. 'flow', redis.call('TYPE', base .. 'flow')['ok'], 'hash')
  or typeerr(base .. 'urgent', redis.call('TYPE', base .. 'urgent')['ok'], 'zset')
  or typeerr(base .. 'laneready', redis.call('TYPE', base .. 'laneready')['ok'], 'zset')
  or typeerr(base .. 'lanewait', redis.call('TYPE', base .. 'lanewait')['ok'], 'zset')
  or typeerr(base .. 'laneactive', redis.call('TYPE', base .. 'laneactive')['ok'], 'hash')
if e then return redis.error_reply(e) end
local meta = redis.call('HMGET', KEYS[5], 'paused', 'max_attempts', 'dead_max')
local paused = 0
if meta[1] == '1' then paused = 1 end
return {
  redis.call('ZCARD', KEYS[1]),
  redis.call('ZCARD', KEYS[2]),
  redis.call('ZCARD', KEYS[3]),
  redis.call('ZCARD', KEYS[4]),
  paused,
  tonumber(meta[2]) or 0,
  tonumber(redis.call('HGET', base .. 'flow', 'waiting')) or 0,
  redis.call('ZCARD', base .. 'urgent'),
  redis.call('ZCARD', base .. 'laneready'),
  redis.call('ZCARD', base .. 'lanewait'),
  redis.call('HLEN', base .. 'laneactive'),
  tonumber(meta[3]) or 0,
}
