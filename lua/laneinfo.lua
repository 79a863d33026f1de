-- laneinfo: read a queue's flow control and any number of its lanes in one atomic snapshot.
-- Writes nothing. A lane that does not exist reads as empty: no limits, nothing waiting.
--
-- KEYS[1]  emq:{<q>}:flow               hash (FORMAT lanes)
-- KEYS[2]  emq:{<q>}:lanes              hash: lane -> its own limits (FORMAT lanelimits)
-- KEYS[3]  emq:{<q>}:laneactive         hash: lane -> claimed jobs
-- KEYS[4]  emq:{<q>}:laneready          lanes with waiting work, by virtual time
-- KEYS[5]  emq:{<q>}:lanewait           held-back lanes, by the ms they may give work
-- ARGV[1]  lane*  name                  a starred ARGV repeats: zero or more lanes, each read
-- DERIVES  emq:{<q>}:lanepending:<lane> read: how many jobs wait in each lane's set
-- FORMAT   lanes    see laneclaim.lua
-- FORMAT   lanelimits  see laneclaim.lua
-- FORMAT   servertime  see claim.lua
-- REPLY    {rate, per, burst, lane, hold, now_ms, then per lane: limits, waiting, active, ready,
--          held}: the queue's rate fields and its lanes' defaults (FORMAT lanelimits) as
--          strings ("" when unset), its own stream's hold (unix ms, 0 when none) and the
--          server's TIME in ms; for each lane in call order its own limits ("" when none), the
--          jobs waiting in its set, its claimed jobs, 1 when it is in laneready else 0, and the
--          unix ms it is held until (0 when it is not in lanewait)
-- ERROR    EMQKEYS    the KEYS are not one queue's flow, lanes, laneactive, laneready, lanewait
-- ERROR    EMQARGS    a lane does not meet its rule
-- ERROR    EMQTYPE    a key holds another type
local base = string.match(KEYS[1] or '', '^(emq:{[0-9A-Za-z_.%-]+}:)flow$')
if #KEYS ~= 5 or not base or #base > 71 or KEYS[2] ~= base .. 'lanes' or KEYS[3] ~= base .. 'laneactive'
  or KEYS[4] ~= base .. 'laneready' or KEYS[5] ~= base .. 'lanewait' then
  return redis.error_reply('EMQKEYS expected emq:{<q>}:flow, lanes, laneactive, laneready, lanewait of one queue')
end
if #ARGV > 1000 then return redis.error_reply('EMQARGS at most 1000 lanes a call') end
for i, lane in ipairs(ARGV) do
  if #lane < 1 or #lane > 64 or string.find(lane, '[^0-9A-Za-z_.%-]') then
    return redis.error_reply('EMQARGS ARGV[' .. i .. '] lane must be 1 to 64 bytes of [A-Za-z0-9_.-]')
  end
end
local function typeerr(key, got, want)
  if got ~= 'none' and got ~= want then return 'EMQTYPE ' .. key .. ' holds a ' .. got .. ', not a ' .. want end
end
local e = typeerr(KEYS[1], redis.call('TYPE', KEYS[1])['ok'], 'hash')
  or typeerr(KEYS[2], redis.call('TYPE', KEYS[2])['ok'], 'hash')
  or typeerr(KEYS[3], redis.call('TYPE', KEYS[3])['ok'], 'hash')
  or typeerr(KEYS[4], redis.call('TYPE', KEYS[4])['ok'], 'zset')
  or typeerr(KEYS[5], redis.call('TYPE', KEYS[5])['ok'], 'zset')
if e then return redis.error_reply(e) end
for _, lane in ipairs(ARGV) do
  local lp = base .. 'lanepending:' .. lane
  e = typeerr(lp, redis.call('TYPE', lp)['ok'], 'zset')
  if e then return redis.error_reply(e) end
end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local f = redis.call('HMGET', KEYS[1], 'rate', 'per', 'burst', 'lane', 'hold')
local hold = tonumber(f[5]) or 0
if hold <= now then hold = 0 end
local out = {f[1] or '', f[2] or '', f[3] or '', f[4] or '', hold, now}
for _, lane in ipairs(ARGV) do
  out[#out + 1] = redis.call('HGET', KEYS[2], lane) or ''
  out[#out + 1] = redis.call('ZCARD', base .. 'lanepending:' .. lane)
  out[#out + 1] = tonumber(redis.call('HGET', KEYS[3], lane)) or 0
  out[#out + 1] = redis.call('ZSCORE', KEYS[4], lane) and 1 or 0
  out[#out + 1] = tonumber(redis.call('ZSCORE', KEYS[5], lane)) or 0
end
return out
