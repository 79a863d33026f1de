-- laneset: set a lane's own limits, or clear them. The lane's pause is kept.
--
-- The limits are a lane's own; each unset one falls back to the queue's default for lanes
-- (flowset), else to none (FORMAT lanelimits). A rate comes with its per and burst: they may
-- only be given with a rate. The new limits apply from the next claim: a lane whose raised cap
-- gives it room again is back in laneready at the next completion of one of its jobs (FORMAT
-- lanes). A change of the lane's rate (its rate, per or burst) starts the new rate afresh:
-- the lane's claim log goes, and a lane held back in lanewait, by its old rate or by a
-- RateLimited closure (the two are not told apart), is released: back in laneready when it
-- has waiting jobs, with a wake marker unless the queue is paused. With every limit unset and
-- the lane not paused, its field is deleted.
--
-- KEYS[1]  emq:{<q>}:lanes              hash: lane -> its own limits (FORMAT lanelimits)
-- ARGV[1]  lane    name                 the lane
-- ARGV[2]  cap     uint[1,1000000]?     the most jobs of the lane claimed at once, fleet-wide;
--          "" unset. The Go bus passes LaneLimits.Cap, "" for 0
-- ARGV[3]  rate    uint[1,1000000]?     claims per per ms; "" unset (LaneLimits.Rate.Limit)
-- ARGV[4]  per     uint[1,86400000]?    the rate's period in ms; "" is 1000 with a rate
--          (LaneLimits.Rate.Per)
-- ARGV[5]  burst   uint[1,100000]?      the rate's burst (FORMAT lanerate); "" is 1 with a
--          rate (LaneLimits.Rate.Burst)
-- ARGV[6]  weight  uint[1,1000]?        the lane's share of round robin; "" unset
--          (LaneLimits.Weight)
-- DERIVES  emq:{<q>}:lanelog:<lane>     the lane's claim times (FORMAT lanerate): deleted
--          when its rate changes. The keys below are read or written only then
-- DERIVES  emq:{<q>}:lanewait           the held-back lanes (zset): the lane leaves it
-- DERIVES  emq:{<q>}:laneready          the lanes with waiting work (zset): the lane joins it
--          at the virtual clock when it was held and has waiting jobs
-- DERIVES  emq:{<q>}:lanepending:<lane> read: whether the lane has waiting jobs
-- DERIVES  emq:{<q>}:flow               read: the virtual clock vt
-- DERIVES  emq:{<q>}:meta               read: paused
-- DERIVES  emq:{<q>}:wake               the wake list (FORMAT wake): one marker when the lane
--          joined laneready
-- FORMAT   lanes    see laneclaim.lua
-- FORMAT   lanelimits  see laneclaim.lua
-- FORMAT   lanerate  see laneclaim.lua
-- FORMAT   wake     see enqueue.lua
-- REPLY    the lane's previous limits (FORMAT lanelimits), "" when it had none
-- ERROR    EMQKEYS    KEYS[1] is not a queue's lanes hash
-- ERROR    EMQARGS    an ARGV does not meet its rule, per or burst is given without a rate, or
--          the count of ARGV is not 6
-- ERROR    EMQTYPE    the key holds another type, or (when the rate changes) lanewait,
--          laneready, the lane's lanepending, flow, meta or wake does
local base = string.match(KEYS[1] or '', '^(emq:{[0-9A-Za-z_.%-]+}:)lanes$')
if #KEYS ~= 1 or not base or #base > 71 then return redis.error_reply('EMQKEYS expected emq:{<q>}:lanes') end
if #ARGV ~= 6 then return redis.error_reply('EMQARGS expected 6 ARGV: lane, cap, rate, per, burst, weight') end
local lane = ARGV[1]
if #lane < 1 or #lane > 64 or string.find(lane, '[^0-9A-Za-z_.%-]') then
  return redis.error_reply('EMQARGS lane must be 1 to 64 bytes of [A-Za-z0-9_.-]')
end
local function opt(i, name, hi)
  local s = ARGV[i]
  if s == '' then return true end
  if #s <= 15 and string.match(s, '^[0-9]+$') and tonumber(s) >= 1 and tonumber(s) <= hi then return true end
  return false, 'EMQARGS ' .. name .. ' must be "" or an integer in [1, ' .. hi .. ']'
end
for _, a in ipairs({{2, 'cap', 1000000}, {3, 'rate', 1000000}, {4, 'per', 86400000}, {5, 'burst', 100000}, {6, 'weight', 1000}}) do
  local ok, msg = opt(a[1], a[2], a[3])
  if not ok then return redis.error_reply(msg) end
end
if ARGV[3] == '' and (ARGV[4] ~= '' or ARGV[5] ~= '') then
  return redis.error_reply('EMQARGS per and burst need a rate')
end
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'hash' then return redis.error_reply('EMQTYPE ' .. KEYS[1] .. ' holds a ' .. kind .. ', not a hash') end
local old = redis.call('HGET', KEYS[1], lane) or ''
local paused = string.match(old, ':(1?)$') or ''
local rate = ARGV[3] .. ':' .. ARGV[4] .. ':' .. ARGV[5]
local oldRate = string.match(old, '^[^:]*:([^:]*:[^:]*:[^:]*):') or '::'
local lp = base .. 'lanepending:' .. lane
local lw = base .. 'lanewait'
local lr = base .. 'laneready'
local fl = base .. 'flow'
local mt = base .. 'meta'
local wk = base .. 'wake'
if rate ~= oldRate then
  local function typeerr(key, got, want)
    if got ~= 'none' and got ~= want then return 'EMQTYPE ' .. key .. ' holds a ' .. got .. ', not a ' .. want end
  end
  local e = typeerr(lw, redis.call('TYPE', lw)['ok'], 'zset') or typeerr(lr, redis.call('TYPE', lr)['ok'], 'zset')
    or typeerr(lp, redis.call('TYPE', lp)['ok'], 'zset') or typeerr(fl, redis.call('TYPE', fl)['ok'], 'hash')
    or typeerr(mt, redis.call('TYPE', mt)['ok'], 'hash') or typeerr(wk, redis.call('TYPE', wk)['ok'], 'list')
  if e then return redis.error_reply(e) end
end
local v = ARGV[2] .. ':' .. rate .. ':' .. ARGV[6] .. ':' .. paused
if v == ':::::' then
  redis.call('HDEL', KEYS[1], lane)
else
  redis.call('HSET', KEYS[1], lane, v)
end
if rate ~= oldRate then
  redis.call('DEL', base .. 'lanelog:' .. lane)
  if redis.call('ZREM', lw, lane) == 1 and redis.call('ZCARD', lp) > 0 then
    redis.call('ZADD', lr, 'NX', tonumber(redis.call('HGET', fl, 'vt')) or 0, lane)
    if redis.call('HGET', mt, 'paused') ~= '1' then
      redis.call('LPUSH', wk, '1')
      redis.call('LTRIM', wk, 0, 15)
    end
  end
end
return old
