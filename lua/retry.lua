-- retry: bring dead jobs back to pending, all or nothing. attempts is kept (it only grows:
-- it is the fencing token), so a job retried after reaching the maximum goes back to dead on
-- its next failure unless the maximum is raised. One wake marker is pushed unless the queue is
-- paused. A job of a lane or a priority waits again in its set (FORMAT lanes). The failure
-- history (FORMAT failure) is kept: it tells why the job died.
--
-- KEYS[1]  emq:{<q>}:dead               score-0 set
-- KEYS[2]  emq:{<q>}:pending            score-0 set
-- KEYS[3]  emq:{<q>}:meta               hash; read: paused
-- KEYS[4]  emq:{<q>}:wake               list of wake-up markers (FORMAT wake)
-- ARGV[1]  id*  jobid                   a starred ARGV repeats: one JOB id per job (one at
--          least), each a dead job of the queue, no id twice
-- DERIVES  emq:{<q>}:job:<id>           each job's row: KEYS[1] up to its type, "job:", the id
-- DERIVES  emq:{<q>}:joblane            the lane and priority of each job (FORMAT joblane); read
--          once per call by TYPE, so a queue without lanes pays one command
-- DERIVES  emq:{<q>}:lanepending:<lane> where a job of a lane, priority 0, waits again
-- DERIVES  emq:{<q>}:urgent             where a job of priority 1 to 3 waits again
-- DERIVES  emq:{<q>}:laneready          where a lane that gets a job back joins
-- DERIVES  emq:{<q>}:lanewait           read: whether a lane is held back
-- DERIVES  emq:{<q>}:flow               fields vt (read) and waiting
-- FORMAT   jobid    see enqueue.lua
-- FORMAT   wake     see enqueue.lua
-- FORMAT   lanes    see laneclaim.lua
-- FORMAT   joblane  see laneclaim.lua
-- FORMAT   failure  see fail.lua
-- REPLY    the number of jobs moved to pending (an integer)
-- ERROR    EMQNOJOB   <id>: a job has no row
-- ERROR    EMQSTATE   <state> <id>: a job is not dead (nothing written)
-- ERROR    EMQKEYS    the KEYS are not one queue's dead, pending, meta, wake
-- ERROR    EMQARGS    an id is not a JOB id or repeats, or no id is given
-- ERROR    EMQTYPE    a key holds another type (a lane key included) or flow's waiting or vt is not a number: nothing written
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
  for i = 1, #ARGV, 1000 do
    local part = {unpack(ARGV, i, math.min(i + 999, #ARGV))}
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
for _, id in ipairs(ARGV) do
  local jk = base .. 'job:' .. id
  redis.call('ZREM', KEYS[1], id)
  redis.call('HSET', jk, 'state', 'pending')
  if not tolane(id) then redis.call('ZADD', KEYS[2], 0, id) end
end
if redis.call('HGET', KEYS[3], 'paused') ~= '1' then
  redis.call('LPUSH', KEYS[4], '1')
  redis.call('LTRIM', KEYS[4], 0, 15)
end
return #ARGV
