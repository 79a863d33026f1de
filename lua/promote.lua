-- promote: move due scheduled jobs (run-at <= server TIME) to pending, oldest run-at first,
-- at most limit of them.
--
-- Atomic, so any number of processes may run it at once: each due job moves exactly once. An
-- id whose row is missing or is not a hash cannot be worked: it is dropped from schedule and
-- not reported. When a job moved and the queue is not paused, one wake marker is pushed. A job
-- of a lane or a priority moves to its set (FORMAT lanes).
--
-- KEYS[1]  emq:{<q>}:schedule           scored by run-at (ms, server clock)
-- KEYS[2]  emq:{<q>}:pending            score-0 set
-- KEYS[3]  emq:{<q>}:meta               hash; read: paused
-- KEYS[4]  emq:{<q>}:wake               list of wake-up markers (FORMAT wake)
-- ARGV[1]  limit  uint[1,999999999999999]  how many jobs to move at most. The Go bus passes
--          PromoteOpts.Limit, else 100
-- DERIVES  emq:{<q>}:job:<id>           each job's row: KEYS[1] up to its type, "job:", the id
-- DERIVES  emq:{<q>}:joblane            the lane and priority of each job (FORMAT joblane); read
--          once per call by TYPE, so a queue without lanes pays one command
-- DERIVES  emq:{<q>}:lanepending:<lane> where a job of a lane, priority 0, waits again
-- DERIVES  emq:{<q>}:urgent             where a job of priority 1 to 3 waits again
-- DERIVES  emq:{<q>}:laneready          where a lane that gets a job back joins
-- DERIVES  emq:{<q>}:lanewait           read: whether a lane is held back
-- DERIVES  emq:{<q>}:flow               fields vt (read) and waiting
-- FORMAT   jobid    see enqueue.lua
-- FORMAT   servertime  see claim.lua
-- FORMAT   wake     see enqueue.lua
-- FORMAT   lanes    see laneclaim.lua
-- FORMAT   joblane  see laneclaim.lua
-- REPLY    {id, ...}: the JOB ids moved to pending, oldest run-at first; {} when none was due
-- ERROR    EMQKEYS    the KEYS are not one queue's schedule, pending, meta, wake
-- ERROR    EMQARGS    limit does not meet its rule, or the count of ARGV is not 1
-- ERROR    EMQTYPE    a key holds another type (a lane key included) or flow's waiting or vt is not a number: nothing written
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
-- lanes: one TYPE per call; with lanes, every lane key the call may write is checked first
-- (FORMAT lanes, see laneclaim.lua).
local jl = redis.call('TYPE', base .. 'joblane')['ok']
if jl ~= 'none' and jl ~= 'hash' then return redis.error_reply('EMQTYPE ' .. base .. 'joblane holds a ' .. jl .. ', not a hash') end
local lanes = jl == 'hash'
if lanes then
  for _, k in ipairs({{'laneactive', 'hash'}, {'laneready', 'zset'}, {'lanewait', 'zset'}, {'flow', 'hash'}, {'urgent', 'zset'}, {'meta', 'hash'}, {'wake', 'list'}}) do
    local got = redis.call('TYPE', base .. k[1])['ok']
    if got ~= 'none' and got ~= k[2] then return redis.error_reply('EMQTYPE ' .. base .. k[1] .. ' holds a ' .. got .. ', not a ' .. k[2]) end
  end
  -- flow's waiting (which HINCRBY moves) and vt (a ZADD score): values the calls after the
  -- first write could not take refuse the call here (FORMAT lanes).
  local fv = redis.call('HMGET', base .. 'flow', 'waiting', 'vt')
  local vt = fv[2] and tonumber(fv[2])
  if fv[1] and not (#fv[1] <= 18 and string.match(fv[1], '^%-?[0-9]+$')) or fv[2] and (not vt or vt ~= vt) then
    return redis.error_reply('EMQTYPE ' .. base .. 'flow holds a waiting that is not an integer or a vt that is not a number')
  end
end
local lanevals = {}
if lanes then
  for i = 1, #due, 1000 do
    local part = {unpack(due, i, math.min(i + 999, #due))}
    local vals = redis.call('HMGET', base .. 'joblane', unpack(part))
    for j = 1, #part do lanevals[part[j]] = vals[j] or nil end
  end
end
if lanes then
  for _, v in pairs(lanevals) do
    local p, lane = string.match(v, '^([0-3]):[0-9]+:(.*)$')
    if p == '0' and lane ~= '' then
      local got = redis.call('TYPE', base .. 'lanepending:' .. lane)['ok']
      if got ~= 'none' and got ~= 'zset' then return redis.error_reply('EMQTYPE ' .. base .. 'lanepending:' .. lane .. ' holds a ' .. got .. ', not a zset') end
    end
  end
end
-- lanes: the lane bookkeeping of jobs leaving active or waiting again (FORMAT lanes).
local freed = {}
local function leaves(id)
  local lane = string.match(lanevals[id] or '', '^[0-3]:[0-9]+:(.+)$')
  if lane then freed[lane] = (freed[lane] or 0) + 1 end
end
local function tolane(id)
  local p, lane = string.match(lanevals[id] or '', '^([0-3]):[0-9]+:(.*)$')
  if not p or (p == '0' and lane == '') then return false end
  if p ~= '0' then
    redis.call('ZADD', base .. 'urgent', -tonumber(p), id)
    return true
  end
  redis.call('ZADD', base .. 'lanepending:' .. lane, 0, id)
  redis.call('HINCRBY', base .. 'flow', 'waiting', 1)
  if not redis.call('ZSCORE', base .. 'lanewait', lane) then
    redis.call('ZADD', base .. 'laneready', 'NX', tonumber(redis.call('HGET', base .. 'flow', 'vt')) or 0, lane)
  end
  return true
end
local function free()
  local names = {}
  for lane in pairs(freed) do names[#names + 1] = lane end
  if #names == 0 then return end
  local act = redis.call('HMGET', base .. 'laneactive', unpack(names))
  local set, del = {}, {}
  for i, lane in ipairs(names) do
    local n = (tonumber(act[i]) or 0) - freed[lane]
    if n > 0 then
      set[#set + 1] = lane
      set[#set + 1] = n
    else
      del[#del + 1] = lane
    end
  end
  if #set > 0 then redis.call('HSET', base .. 'laneactive', unpack(set)) end
  if #del > 0 then redis.call('HDEL', base .. 'laneactive', unpack(del)) end
  -- A lane its cap had stopped has a slot again: back to laneready, and wake a worker.
  local inready = redis.call('ZMSCORE', base .. 'laneready', unpack(names))
  local inwait = redis.call('ZMSCORE', base .. 'lanewait', unpack(names))
  local back = {}
  for i, lane in ipairs(names) do
    if not inready[i] and not inwait[i] then
      local n = redis.pcall('ZCARD', base .. 'lanepending:' .. lane)
      if type(n) == 'number' and n > 0 then
        back[#back + 1] = tonumber(redis.call('HGET', base .. 'flow', 'vt')) or 0
        back[#back + 1] = lane
      end
    end
  end
  if #back > 0 then
    redis.call('ZADD', base .. 'laneready', unpack(back))
    if redis.call('HGET', base .. 'meta', 'paused') ~= '1' then
      redis.call('LPUSH', base .. 'wake', '1')
      redis.call('LTRIM', base .. 'wake', 0, 15)
    end
  end
end
local moved = {}
for _, id in ipairs(due) do
  redis.call('ZREM', KEYS[1], id)
  local jk = base .. 'job:' .. id
  if redis.call('TYPE', jk)['ok'] == 'hash' then
    redis.call('HSET', jk, 'state', 'pending')
    if not tolane(id) then redis.call('ZADD', KEYS[2], 0, id) end
    moved[#moved + 1] = id
  end
end
if #moved > 0 and redis.call('HGET', KEYS[3], 'paused') ~= '1' then
  redis.call('LPUSH', KEYS[4], '1')
  redis.call('LTRIM', KEYS[4], 0, 15)
end
return moved
