-- flowset: set a queue's own rate and the default limits of its lanes, or clear them.
--
-- The queue's rate bounds every claim of the queue, of every lane and of the jobs without one
-- (FORMAT lanerate; its claim times are kept in flowlog). The defaults apply to every lane
-- field by field where the lane has no limit of its own (laneset); they do not apply to the
-- queue's own stream of jobs without a lane, which the queue's rate alone bounds. A queue with
-- a rate is claimed by laneclaim (FORMAT lanes). The fields of flow that are state (hold, vt,
-- waiting) are kept; lanesince is written when the lanes' default rate changes (below).
--
-- A changed rate starts afresh, as laneset's does. When the queue's rate changes (its rate,
-- per or burst), its claim log flowlog goes. Flow field hold is kept: it is the RateLimited
-- closure of the queue's own stream (ratelimited writes it, no rate does; the queue's rate
-- holds claims back through flowlog alone), so it has no rate part to clear. When the lanes'
-- default rate changes (lane_rate, lane_per or lane_burst), flow field lanesince is set to
-- server TIME (deleted when the default rate is cleared), so that every lane on the default
-- rate counts none of its log's older claims (FORMAT lanes); and every lane without a rate of
-- its own (lanes) that the call finds loses its claim log lanelog:<lane>, and those of them
-- held in lanewait (by the old rate or by a RateLimited closure: the two are not told apart)
-- are released: back in laneready at the virtual clock when they have waiting jobs. The
-- lanes found are, bounded (MAXLANES, 10000 each): the 10000 of lanewait held the longest,
-- the first 10000 of laneready, those of laneactive and those of lanes (each of the two
-- hashes only when it has at most 10000 fields). A lane in none of these keeps its log until
-- it expires (FORMAT lanerate), uncounted; a lane held in lanewait beyond the bound stays
-- held until its hold ends. After either change, one wake marker is pushed unless the queue
-- is paused, when laneready, pending or urgent holds jobs.
--
-- KEYS[1]  emq:{<q>}:flow               hash: fields rate, per, burst, lane, lanesince (FORMAT
--          lanes); vt read
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
-- DERIVES  emq:{<q>}:flowlog            the queue's claim times (FORMAT lanerate): deleted
--          when the queue's rate changes. The keys below are read or written only when a rate
--          changes
-- DERIVES  emq:{<q>}:lanelog:<lane>     a lane's claim times: deleted when the lanes' default
--          rate changes and the lane has no rate of its own
-- DERIVES  emq:{<q>}:lanes              read: the lanes' own limits (FORMAT lanelimits)
-- DERIVES  emq:{<q>}:laneactive         read: the lanes with claimed jobs
-- DERIVES  emq:{<q>}:lanewait           the held-back lanes (zset): a released lane leaves it
-- DERIVES  emq:{<q>}:laneready          the lanes with waiting work (zset): a released lane
--          joins it at the virtual clock when it has waiting jobs
-- DERIVES  emq:{<q>}:lanepending:<lane> read: whether a released lane has waiting jobs (a key
--          of another type reads as none)
-- DERIVES  emq:{<q>}:pending            read: whether jobs without a lane wait (a key of
--          another type reads as none)
-- DERIVES  emq:{<q>}:urgent             read: whether jobs of a priority wait (a key of another
--          type reads as none)
-- DERIVES  emq:{<q>}:meta               read: paused
-- DERIVES  emq:{<q>}:wake               the wake list (FORMAT wake): one marker after a change
-- FORMAT   lanes    see laneclaim.lua
-- FORMAT   lanelimits  see laneclaim.lua
-- FORMAT   lanerate  see laneclaim.lua
-- FORMAT   wake     see enqueue.lua
-- REPLY    1 (integer)
-- ERROR    EMQKEYS    KEYS[1] is not a queue's flow hash
-- ERROR    EMQARGS    an ARGV does not meet its rule, a per or a burst is given without its
--          rate, or the count of ARGV is not 8
-- ERROR    EMQTYPE    the key holds another type, or (when a rate changes) flow's vt is not a
--          number or lanes, laneactive, laneready, lanewait, meta or wake holds another type
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
-- Which rates change, and every key the changes write or read checked before the first write.
local was = redis.call('HMGET', KEYS[1], 'rate', 'per', 'burst', 'lane', 'vt')
local qchanged = (was[1] or '') .. ':' .. (was[2] or '') .. ':' .. (was[3] or '') ~= ARGV[1] .. ':' .. ARGV[2] .. ':' .. ARGV[3]
local oldLaneRate = string.match(was[4] or '', '^[^:]*:([^:]*:[^:]*:[^:]*):') or '::'
local lchanged = oldLaneRate ~= ARGV[5] .. ':' .. ARGV[6] .. ':' .. ARGV[7]
local fl = base .. 'flowlog'
local ls = base .. 'lanes'
local la = base .. 'laneactive'
local lw = base .. 'lanewait'
local lr = base .. 'laneready'
local pd = base .. 'pending'
local ug = base .. 'urgent'
local mt = base .. 'meta'
local wk = base .. 'wake'
local vt = 0
if qchanged or lchanged then
  local function typeerr(key, got, want)
    if got ~= 'none' and got ~= want then return 'EMQTYPE ' .. key .. ' holds a ' .. got .. ', not a ' .. want end
  end
  local e = typeerr(ls, redis.call('TYPE', ls)['ok'], 'hash') or typeerr(la, redis.call('TYPE', la)['ok'], 'hash')
    or typeerr(lw, redis.call('TYPE', lw)['ok'], 'zset') or typeerr(lr, redis.call('TYPE', lr)['ok'], 'zset')
    or typeerr(mt, redis.call('TYPE', mt)['ok'], 'hash') or typeerr(wk, redis.call('TYPE', wk)['ok'], 'list')
  if e then return redis.error_reply(e) end
  vt = was[5] and tonumber(was[5])
  if was[5] and (not vt or vt ~= vt) then
    return redis.error_reply('EMQTYPE ' .. KEYS[1] .. ' holds a vt that is not a number')
  end
  vt = vt or 0
end
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
if not (qchanged or lchanged) then return 1 end
if qchanged then redis.call('DEL', fl) end
if lchanged then
  if ARGV[5] == '' then
    redis.call('HDEL', KEYS[1], 'lanesince')
  else
    local t = redis.call('TIME')
    redis.call('HSET', KEYS[1], 'lanesince', t[1] * 1000 + math.floor(t[2] / 1000))
  end
  local MAXLANES = 10000
  -- The lanes found (see above), each once; then those without a rate of their own.
  local found, names = {}, {}
  local function note(list)
    for _, lane in ipairs(list) do
      if lane ~= '' and not found[lane] then
        found[lane] = true
        names[#names + 1] = lane
      end
    end
  end
  local held = redis.call('ZREVRANGE', lw, 0, MAXLANES - 1)
  note(held)
  note(redis.call('ZRANGE', lr, 0, MAXLANES - 1))
  if redis.call('HLEN', la) <= MAXLANES then note(redis.call('HKEYS', la)) end
  if redis.call('HLEN', ls) <= MAXLANES then note(redis.call('HKEYS', ls)) end
  local own = {}
  for from = 1, #names, 1000 do -- 1000 lanes a read (unpack's bound)
    local part = redis.call('HMGET', ls, unpack(names, from, math.min(from + 999, #names)))
    for i = 1, #part do
      own[names[from + i - 1]] = string.match(part[i] or '', '^[^:]*:([0-9]+):') ~= nil
    end
  end
  for _, lane in ipairs(names) do
    if not own[lane] then redis.call('DEL', base .. 'lanelog:' .. lane) end
  end
  local back = {}
  for _, lane in ipairs(held) do
    if lane ~= '' and not own[lane] then
      redis.call('ZREM', lw, lane)
      local n = redis.pcall('ZCARD', base .. 'lanepending:' .. lane)
      if type(n) == 'number' and n > 0 then
        back[#back + 1] = vt
        back[#back + 1] = lane
      end
    end
  end
  for i = 1, #back, 2000 do redis.call('ZADD', lr, 'NX', unpack(back, i, math.min(i + 1999, #back))) end
end
-- Work that the old rates held back may be claimable now: wake a worker.
-- pcall: a key of another type reads as none.
local function waits(n) return type(n) == 'number' and n > 0 end
if (waits(redis.pcall('ZCARD', lr)) or waits(redis.pcall('ZCARD', pd)) or waits(redis.pcall('ZCARD', ug)))
  and redis.call('HGET', mt, 'paused') ~= '1' then
  redis.call('LPUSH', wk, '1')
  redis.call('LTRIM', wk, 0, 15)
end
return 1
