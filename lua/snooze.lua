-- snooze: hand a claimed job back without counting it as a failure: to schedule at server
-- TIME + delay_ms, or to pending at once when delay_ms is 0. It is never sent to dead.
--
-- Fenced like complete (FORMAT fencing). attempts is kept (it never goes down), so the next
-- claim mints token + 1; note that attempts counts claims, so a later fail measures the
-- queue's maximum against claims, snoozes included. A job that goes to pending pushes a wake
-- marker unless the queue is paused. A job of a lane frees its lane's slot and waits again in
-- its lane's set (FORMAT lanes).
--
-- KEYS[1]  emq:{<q>}:active             scored by lease deadline (FORMAT lease)
-- KEYS[2]  emq:{<q>}:schedule           scored by run-at (ms, server clock)
-- KEYS[3]  emq:{<q>}:pending            score-0 set
-- KEYS[4]  emq:{<q>}:meta               hash; read: paused
-- KEYS[5]  emq:{<q>}:wake               list of wake-up markers (FORMAT wake)
-- ARGV[1]  id        jobid                    the job's JOB id
-- ARGV[2]  token     fence                    the attempts count the claim returned
-- ARGV[3]  delay_ms  uint[0,999999999999999]  run-at = server TIME + delay_ms; 0 = pending now
-- DERIVES  emq:{<q>}:job:<id>           the job's row: KEYS[1] up to its type, "job:", the id
-- DERIVES  emq:{<q>}:joblane            the lane and priority of each job (FORMAT joblane); read
--          once per call by TYPE, so a queue without lanes pays one command
-- DERIVES  emq:{<q>}:laneactive         a freed lane's count of claimed jobs (FORMAT lanes)
-- DERIVES  emq:{<q>}:lanepending:<lane> where a job of a lane, priority 0, waits again
-- DERIVES  emq:{<q>}:urgent             where a job of priority 1 to 3 waits again; read:
--          whether jobs of a priority wait, when a freed lane has none of priority 0 (a
--          wake marker then)
-- DERIVES  emq:{<q>}:laneready          where a lane that gets a job back joins
-- DERIVES  emq:{<q>}:lanewait           read: whether a lane is held back
-- DERIVES  emq:{<q>}:flow               fields vt (read) and waiting
-- FORMAT   jobid    see enqueue.lua
-- FORMAT   servertime  see claim.lua
-- FORMAT   fencing  see complete.lua
-- FORMAT   wake     see enqueue.lua
-- FORMAT   lease    see claim.lua
-- FORMAT   lanes    see laneclaim.lua
-- FORMAT   joblane  see laneclaim.lua
-- REPLY    {where, at_ms}: where is "scheduled" (at_ms = run-at) or "pending" (at_ms = server
--          TIME)
-- ERROR    EMQSTALE   no row | not active | token mismatch (FORMAT fencing; nothing written)
-- ERROR    EMQKEYS    the KEYS are not one queue's active, schedule, pending, meta, wake
-- ERROR    EMQARGS    an ARGV does not meet its rule, or the count of ARGV is not 3
-- ERROR    EMQTYPE    a key holds another type (a lane key included) or flow's waiting or vt is not a number: nothing written
local base = string.match(KEYS[1] or '', '^(emq:{[0-9A-Za-z_.%-]+}:)active$')
if #KEYS ~= 5 or not base or #base > 71 or KEYS[2] ~= base .. 'schedule' or KEYS[3] ~= base .. 'pending' or KEYS[4] ~= base .. 'meta'
  or KEYS[5] ~= base .. 'wake' then
  return redis.error_reply('EMQKEYS expected emq:{<q>}:active, schedule, pending, meta, wake of one queue')
end
if #ARGV ~= 3 then return redis.error_reply('EMQARGS expected 3 ARGV: id, token, delay_ms') end
local id, token, delay = ARGV[1], ARGV[2], ARGV[3]
if #id ~= 30 or not string.match(id, '^JOB_[0-7][0-9A-HJKMNP-TV-Z]+$') then
  return redis.error_reply('EMQARGS ARGV[1] is not a JOB id')
end
if #token > 15 or not string.match(token, '^[1-9][0-9]*$') then
  return redis.error_reply('EMQARGS ARGV[2] token must be an integer in [1, 999999999999999]')
end
if #delay > 15 or not string.match(delay, '^[0-9]+$') then
  return redis.error_reply('EMQARGS delay_ms must be an integer in [0, 999999999999999]')
end
delay = tonumber(delay)
local function typeerr(key, got, want)
  if got ~= 'none' and got ~= want then return 'EMQTYPE ' .. key .. ' holds a ' .. got .. ', not a ' .. want end
end
local e = typeerr(KEYS[1], redis.call('TYPE', KEYS[1])['ok'], 'zset')
  or typeerr(KEYS[2], redis.call('TYPE', KEYS[2])['ok'], 'zset')
  or typeerr(KEYS[3], redis.call('TYPE', KEYS[3])['ok'], 'zset')
  or typeerr(KEYS[4], redis.call('TYPE', KEYS[4])['ok'], 'hash')
  or typeerr(KEYS[5], redis.call('TYPE', KEYS[5])['ok'], 'list')
if e then return redis.error_reply(e) end
local jk = base .. 'job:' .. id
local kind = redis.call('TYPE', jk)['ok']
if kind == 'none' then return redis.error_reply('EMQSTALE no row') end
if kind ~= 'hash' then return redis.error_reply('EMQTYPE ' .. jk .. ' holds a ' .. kind .. ', not a hash') end
local row = redis.call('HMGET', jk, 'state', 'attempts')
if row[1] ~= 'active' then return redis.error_reply('EMQSTALE not active') end
if row[2] ~= token then return redis.error_reply('EMQSTALE token mismatch') end
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
if lanes then lanevals[id] = redis.call('HGET', base .. 'joblane', id) or nil end
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
  -- A lane whose waiting jobs are all urgent (priority 1 to 3) is not in laneready: its slot
  -- wakes a worker when urgent holds jobs (pcall: a key of another type reads as none).
  local urgent
  local function urgentWaits()
    if urgent == nil then
      local u = redis.pcall('ZCARD', base .. 'urgent')
      urgent = type(u) == 'number' and u > 0
    end
    return urgent
  end
  local back, wake = {}, false
  for i, lane in ipairs(names) do
    if not inready[i] and not inwait[i] then
      local n = redis.pcall('ZCARD', base .. 'lanepending:' .. lane)
      if type(n) == 'number' and n > 0 then
        back[#back + 1] = tonumber(redis.call('HGET', base .. 'flow', 'vt')) or 0
        back[#back + 1] = lane
      elseif urgentWaits() then
        wake = true
      end
    end
  end
  if #back > 0 then redis.call('ZADD', base .. 'laneready', unpack(back)) end
  if (#back > 0 or wake) and redis.call('HGET', base .. 'meta', 'paused') ~= '1' then
    redis.call('LPUSH', base .. 'wake', '1')
    redis.call('LTRIM', base .. 'wake', 0, 15)
  end
end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZREM', KEYS[1], id)
leaves(id)
free()
if delay == 0 then
  redis.call('HSET', jk, 'state', 'pending')
  if not tolane(id) then redis.call('ZADD', KEYS[3], 0, id) end
  if redis.call('HGET', KEYS[4], 'paused') ~= '1' then
    redis.call('LPUSH', KEYS[5], '1')
    redis.call('LTRIM', KEYS[5], 0, 15)
  end
  return {'pending', now}
end
redis.call('HSET', jk, 'state', 'scheduled')
redis.call('ZADD', KEYS[2], now + delay, id)
return {'scheduled', now + delay}
