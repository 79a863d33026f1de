-- lanepause: pause one lane, or resume it. A paused lane gives no work: claims skip it (it
-- leaves laneready) while its jobs wait, and its claimed jobs run on. Resuming puts a lane that
-- has waiting jobs back in laneready and pushes one wake marker unless the queue is paused;
-- a lane whose waiting jobs are all urgent (priority 1 to 3) is not in laneready, so resuming
-- pushes the marker when urgent holds jobs.
--
-- KEYS[1]  emq:{<q>}:lanes              hash: lane -> its own limits, paused included (FORMAT
--          lanelimits)
-- KEYS[2]  emq:{<q>}:laneready          lanes with waiting work, by virtual time
-- KEYS[3]  emq:{<q>}:lanewait           read: whether the lane is held back
-- KEYS[4]  emq:{<q>}:flow               read: the virtual clock vt
-- KEYS[5]  emq:{<q>}:meta               hash; read: paused
-- KEYS[6]  emq:{<q>}:wake               list of wake-up markers (FORMAT wake)
-- ARGV[1]  lane    name                 the lane
-- ARGV[2]  paused  uint[0,1]            1 pauses, 0 resumes
-- DERIVES  emq:{<q>}:lanepending:<lane> read: whether the lane has waiting jobs
-- DERIVES  emq:{<q>}:urgent             read: whether jobs of a priority wait (a key of another
--          type reads as none)
-- FORMAT   lanes    see laneclaim.lua
-- FORMAT   lanelimits  see laneclaim.lua
-- FORMAT   wake     see enqueue.lua
-- REPLY    1 when the lane's pause changed, 0 when it was already so
-- ERROR    EMQKEYS    the KEYS are not one queue's lanes, laneready, lanewait, flow, meta, wake
-- ERROR    EMQARGS    an ARGV does not meet its rule, or the count of ARGV is not 2
-- ERROR    EMQTYPE    a key holds another type
local base = string.match(KEYS[1] or '', '^(emq:{[0-9A-Za-z_.%-]+}:)lanes$')
if #KEYS ~= 6 or not base or #base > 71 or KEYS[2] ~= base .. 'laneready' or KEYS[3] ~= base .. 'lanewait'
  or KEYS[4] ~= base .. 'flow' or KEYS[5] ~= base .. 'meta' or KEYS[6] ~= base .. 'wake' then
  return redis.error_reply('EMQKEYS expected emq:{<q>}:lanes, laneready, lanewait, flow, meta, wake of one queue')
end
if #ARGV ~= 2 then return redis.error_reply('EMQARGS expected 2 ARGV: lane, paused') end
local lane, paused = ARGV[1], ARGV[2]
if #lane < 1 or #lane > 64 or string.find(lane, '[^0-9A-Za-z_.%-]') then
  return redis.error_reply('EMQARGS lane must be 1 to 64 bytes of [A-Za-z0-9_.-]')
end
if paused ~= '0' and paused ~= '1' then return redis.error_reply('EMQARGS paused must be 0 or 1') end
local function typeerr(key, got, want)
  if got ~= 'none' and got ~= want then return 'EMQTYPE ' .. key .. ' holds a ' .. got .. ', not a ' .. want end
end
local lp = base .. 'lanepending:' .. lane
local e = typeerr(KEYS[1], redis.call('TYPE', KEYS[1])['ok'], 'hash')
  or typeerr(KEYS[2], redis.call('TYPE', KEYS[2])['ok'], 'zset')
  or typeerr(KEYS[3], redis.call('TYPE', KEYS[3])['ok'], 'zset')
  or typeerr(KEYS[4], redis.call('TYPE', KEYS[4])['ok'], 'hash')
  or typeerr(KEYS[5], redis.call('TYPE', KEYS[5])['ok'], 'hash')
  or typeerr(KEYS[6], redis.call('TYPE', KEYS[6])['ok'], 'list')
  or typeerr(lp, redis.call('TYPE', lp)['ok'], 'zset')
if e then return redis.error_reply(e) end
local old = redis.call('HGET', KEYS[1], lane) or ':::::'
local was = string.sub(old, -1) == '1'
if was == (paused == '1') then return 0 end
local v = string.gsub(old, ':1?$', ':' .. (paused == '1' and '1' or ''))
if v == ':::::' then
  redis.call('HDEL', KEYS[1], lane)
else
  redis.call('HSET', KEYS[1], lane, v)
end
if paused == '1' then
  redis.call('ZREM', KEYS[2], lane)
elseif not redis.call('ZSCORE', KEYS[3], lane) then
  local wake = redis.call('ZCARD', lp) > 0
  if wake then
    redis.call('ZADD', KEYS[2], 'NX', tonumber(redis.call('HGET', KEYS[4], 'vt')) or 0, lane)
  else
    local u = redis.pcall('ZCARD', base .. 'urgent')
    wake = type(u) == 'number' and u > 0
  end
  if wake and redis.call('HGET', KEYS[5], 'paused') ~= '1' then
    redis.call('LPUSH', KEYS[6], '1')
    redis.call('LTRIM', KEYS[6], 0, 15)
  end
end
return 1
