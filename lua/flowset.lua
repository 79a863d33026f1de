-- flowset: set a queue's own rate and the default limits of its lanes, or clear them.
--
-- The queue's rate bounds every claim of the queue, of every lane and of the jobs without one
-- (FORMAT lanerate; its claim times are kept in flowlog). The defaults apply to every lane
-- field by field where the lane has no limit of its own (laneset); they do not apply to the
-- queue's own stream of jobs without a lane, which the queue's rate alone bounds. A queue with
-- a rate is claimed by laneclaim (FORMAT lanes). The fields of flow that are state (hold, vt,
-- waiting) are kept.
--
-- KEYS[1]  emq:{<q>}:flow               hash: fields rate, per, burst, lane (FORMAT lanes)
-- ARGV[1]  rate         uint[1,1000000]?   the queue's claims per per ms; "" for none. The Go
--          bus passes QueueLimits.Rate.Limit
-- ARGV[2]  per          uint[1,86400000]?  the queue rate's period in ms; "" is 1000 with a rate
-- ARGV[3]  burst        uint[1,100000]?    the queue rate's burst; "" is 1 with a rate
-- ARGV[4]  lane_cap     uint[1,1000000]?   the default cap of every lane; "" for none. The Go
--          bus passes QueueLimits.Lanes.Cap
-- ARGV[5]  lane_rate    uint[1,1000000]?   the default rate of every lane; "" for none
-- ARGV[6]  lane_per     uint[1,86400000]?  its period in ms; "" is 1000 with a rate
-- ARGV[7]  lane_burst   uint[1,100000]?    its burst; "" is 1 with a rate
-- ARGV[8]  lane_weight  uint[1,1000]?      the default weight of every lane, and the weight of
--          the queue's own stream; "" is 1
-- FORMAT   lanes    see laneclaim.lua
-- FORMAT   lanelimits  see laneclaim.lua
-- FORMAT   lanerate  see laneclaim.lua
-- REPLY    1 (integer)
-- ERROR    EMQKEYS    KEYS[1] is not a queue's flow hash
-- ERROR    EMQARGS    an ARGV does not meet its rule, a per or a burst is given without its
--          rate, or the count of ARGV is not 8
-- ERROR    EMQTYPE    the key holds another type
local base = string.match(KEYS[1] or '', '^(emq:{[0-9A-Za-z_.%-]+}:)flow$')
if #KEYS ~= 1 or not base or #base > 71 then return redis.error_reply('EMQKEYS expected emq:{<q>}:flow') end
if #ARGV ~= 8 then
  return redis.error_reply('EMQARGS expected 8 ARGV: rate, per, burst, lane_cap, lane_rate, lane_per, lane_burst, lane_weight')
end
local function opt(i, name, hi)
  local s = ARGV[i]
  if s == '' then return true end
  if #s <= 15 and string.match(s, '^[0-9]+$') and tonumber(s) >= 1 and tonumber(s) <= hi then return true end
  return false, 'EMQARGS ' .. name .. ' must be "" or an integer in [1, ' .. hi .. ']'
end
for _, a in ipairs({{1, 'rate', 1000000}, {2, 'per', 86400000}, {3, 'burst', 100000}, {4, 'lane_cap', 1000000},
  {5, 'lane_rate', 1000000}, {6, 'lane_per', 86400000}, {7, 'lane_burst', 100000}, {8, 'lane_weight', 1000}}) do
  local ok, msg = opt(a[1], a[2], a[3])
  if not ok then return redis.error_reply(msg) end
end
if ARGV[1] == '' and (ARGV[2] ~= '' or ARGV[3] ~= '') then return redis.error_reply('EMQARGS per and burst need a rate') end
if ARGV[5] == '' and (ARGV[6] ~= '' or ARGV[7] ~= '') then
  return redis.error_reply('EMQARGS lane_per and lane_burst need a lane_rate')
end
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'hash' then return redis.error_reply('EMQTYPE ' .. KEYS[1] .. ' holds a ' .. kind .. ', not a hash') end
local set, del = {}, {}
for i, f in ipairs({'rate', 'per', 'burst'}) do
  if ARGV[i] == '' then
    del[#del + 1] = f
  else
    set[#set + 1] = f
    set[#set + 1] = ARGV[i]
  end
end
local lane = ARGV[4] .. ':' .. ARGV[5] .. ':' .. ARGV[6] .. ':' .. ARGV[7] .. ':' .. ARGV[8] .. ':'
if lane == ':::::' then
  del[#del + 1] = 'lane'
else
  set[#set + 1] = 'lane'
  set[#set + 1] = lane
end
if #del > 0 then redis.call('HDEL', KEYS[1], unpack(del)) end
if #set > 0 then redis.call('HSET', KEYS[1], unpack(set)) end
return 1
