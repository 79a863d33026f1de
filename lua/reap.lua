-- reap: recover jobs whose lease ran out (deadline <= server TIME), oldest deadline first, at
-- most limit of them: back to pending, or to dead when their attempts reached the maximum.
--
-- Atomic, so any number of processes may run it at once: each expired job moves exactly once.
-- attempts is kept; the next claim mints attempts + 1, which fences out the holder whose lease
-- ran out (FORMAT lease). The maximum is max_attempts when it is > 0, else the queue's meta
-- field max_attempts, else default_max_attempts; 0 there means no maximum. An id whose row is
-- missing or is not a hash is dropped from active and not reported. When a job went to pending
-- and the queue is not paused, one wake marker is pushed. A lease that ran out is a failed
-- attempt: each moved job's failure history gets the entry "lease expired" (FORMAT failure),
-- unless the history key holds another type than a list, which is then left as it is. A job
-- cancelled while claimed (state "cancelling") goes to dead, recorded as "cancelled" (FORMAT
-- cancel). A job of a lane frees its lane's slot (so a crashed holder's slots come back) and
-- waits again in its lane's set (FORMAT lanes); its refunds (FORMAT joblane) are not counted
-- against the maximum. Jobs sent to dead past the queue's dead_max delete the oldest other dead
-- jobs (FORMAT deadmax).
--
-- KEYS[1]  emq:{<q>}:active             scored by lease deadline (FORMAT lease)
-- KEYS[2]  emq:{<q>}:pending            score-0 set
-- KEYS[3]  emq:{<q>}:dead               score-0 set
-- KEYS[4]  emq:{<q>}:meta               hash; read: max_attempts, paused, dead_max
-- KEYS[5]  emq:{<q>}:wake               list of wake-up markers (FORMAT wake)
-- ARGV[1]  limit                 uint[1,999999999999999]  how many jobs to move at most. The
--          Go bus passes ReapOpts.Limit, else 100
-- ARGV[2]  max_attempts          uint[0,999999999999999]  this call's maximum; 0 defers to
--          the queue's meta field max_attempts
-- ARGV[3]  default_max_attempts  uint[0,999999999999999]  the maximum when both above are 0
--          or absent; 0 = none. The Go bus passes Config.MaxAttempts (default 25; 0 when it
--          is negative)
-- DERIVES  emq:{<q>}:job:<id>           each job's row, and those of the dead jobs dead_max
--          deletes (FORMAT deadmax): KEYS[1] up to its type, "job:", the id
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
-- DERIVES  emq:{<q>}:errors:<id>        each job's failure history, and those of the dead jobs
--          dead_max deletes: KEYS[1] up to its type, "errors:", the id
-- FORMAT   jobid    see enqueue.lua
-- FORMAT   servertime  see claim.lua
-- FORMAT   lease    see claim.lua
-- FORMAT   wake     see enqueue.lua
-- FORMAT   lanes    see laneclaim.lua
-- FORMAT   joblane  see laneclaim.lua
-- FORMAT   failure  see fail.lua
-- FORMAT   cancel   see cancel.lua
-- FORMAT   deadmax  see configure.lua
-- REPLY    {requeued, dead}: two lists of JOB ids, oldest deadline first: the jobs moved to
--          pending and the jobs moved to dead; {{}, {}} when no lease had run out
-- ERROR    EMQKEYS    the KEYS are not one queue's active, pending, dead, meta, wake
-- ERROR    EMQARGS    an ARGV does not meet its rule, or the count of ARGV is not 3
-- ERROR    EMQTYPE    a key holds another type (a lane key included) or flow's waiting or vt is not a number: nothing written
local base = string.match(KEYS[1] or '', '^(emq:{[0-9A-Za-z_.%-]+}:)active$')
if #KEYS ~= 5 or not base or #base > 71 or KEYS[2] ~= base .. 'pending' or KEYS[3] ~= base .. 'dead' or KEYS[4] ~= base .. 'meta'
  or KEYS[5] ~= base .. 'wake' then
  return redis.error_reply('EMQKEYS expected emq:{<q>}:active, pending, dead, meta, wake of one queue')
end
local function uint(s)
  if s and #s <= 15 and string.match(s, '^[0-9]+$') then return tonumber(s) end
end
if #ARGV ~= 3 then return redis.error_reply('EMQARGS expected 3 ARGV: limit, max_attempts, default_max_attempts') end
local limit, max, dmax = uint(ARGV[1]), uint(ARGV[2]), uint(ARGV[3])
if not limit or limit < 1 then return redis.error_reply('EMQARGS limit must be an integer > 0') end
if not max then return redis.error_reply('EMQARGS max_attempts must be an integer >= 0') end
if not dmax then return redis.error_reply('EMQARGS default_max_attempts must be an integer >= 0') end
local function typeerr(key, got, want)
  if got ~= 'none' and got ~= want then return 'EMQTYPE ' .. key .. ' holds a ' .. got .. ', not a ' .. want end
end
local e = typeerr(KEYS[1], redis.call('TYPE', KEYS[1])['ok'], 'zset')
  or typeerr(KEYS[2], redis.call('TYPE', KEYS[2])['ok'], 'zset')
  or typeerr(KEYS[3], redis.call('TYPE', KEYS[3])['ok'], 'zset')
  or typeerr(KEYS[4], redis.call('TYPE', KEYS[4])['ok'], 'hash')
  or typeerr(KEYS[5], redis.call('TYPE', KEYS[5])['ok'], 'list')
if e then return redis.error_reply(e) end
local meta = redis.call('HMGET', KEYS[4], 'max_attempts', 'paused', 'dead_max')
if max == 0 then max = tonumber(meta[1]) or dmax end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, limit)
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
  for i = 1, #expired, 1000 do
    local part = {unpack(expired, i, math.min(i + 999, #expired))}
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
  -- 1000 lanes a round (unpack's bound), so any number of freed lanes is accounted.
  local woke = false
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
  for from = 1, #names, 1000 do
    local part = {unpack(names, from, math.min(from + 999, #names))}
    local act = redis.call('HMGET', base .. 'laneactive', unpack(part))
    local set, del = {}, {}
    for i, lane in ipairs(part) do
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
    local inready = redis.call('ZMSCORE', base .. 'laneready', unpack(part))
    local inwait = redis.call('ZMSCORE', base .. 'lanewait', unpack(part))
    local back = {}
    for i, lane in ipairs(part) do
      if not inready[i] and not inwait[i] then
        local n = redis.pcall('ZCARD', base .. 'lanepending:' .. lane)
        if type(n) == 'number' and n > 0 then
          back[#back + 1] = tonumber(redis.call('HGET', base .. 'flow', 'vt')) or 0
          back[#back + 1] = lane
        elseif urgentWaits() then
          woke = true
        end
      end
    end
    if #back > 0 then
      redis.call('ZADD', base .. 'laneready', unpack(back))
      woke = true
    end
  end
  if woke and redis.call('HGET', base .. 'meta', 'paused') ~= '1' then
    redis.call('LPUSH', base .. 'wake', '1')
    redis.call('LTRIM', base .. 'wake', 0, 15)
  end
end
-- trimdead deletes the oldest dead jobs past the queue's dead_max (FORMAT deadmax), none of
-- sent (the ids this call sent to dead), at most 100 more than sent holds: ZREM and DEL per
-- 1000 (unpack's bound), each history by a DEL of its own, the joblane fields with the rows.
local function trimdead(deadmax, sent)
  local dead = base .. 'dead'
  if not (deadmax and #deadmax <= 15 and string.match(deadmax, '^[1-9][0-9]*$')) then return end
  local over = math.min(redis.call('ZCARD', dead) - tonumber(deadmax), #sent + 100)
  if over <= 0 then return end
  local skip, gone, rows = {}, {}, {}
  for _, id in ipairs(sent) do skip[id] = true end
  for _, id in ipairs(redis.call('ZRANGE', dead, 0, over + #sent - 1)) do
    if #gone == over then break end
    if not skip[id] then
      gone[#gone + 1] = id
      rows[#rows + 1] = base .. 'job:' .. id
    end
  end
  for i = 1, #gone, 1000 do
    redis.call('ZREM', dead, unpack(gone, i, math.min(i + 999, #gone)))
    redis.call('DEL', unpack(rows, i, math.min(i + 999, #rows)))
    if lanes then redis.call('HDEL', base .. 'joblane', unpack(gone, i, math.min(i + 999, #gone))) end
  end
  for _, id in ipairs(gone) do redis.pcall('DEL', base .. 'errors:' .. id) end
end
-- Per job one read (its state and attempts) and one write (its state), plus its failure
-- history's entry; the sets take the moved ids in one ZREM and one ZADD each per 1000
-- (unpack's bound).
local requeued, dead, toPending, toDead = {}, {}, {}, {}
for _, id in ipairs(expired) do
  local jk = base .. 'job:' .. id
  -- HMGET answers an error for a key of another type and two nils for a missing row (or a
  -- hash with neither field): EXISTS tells those two apart only then.
  local row = redis.pcall('HMGET', jk, 'state', 'attempts')
  local hash = not row['err'] and (row[1] or row[2] or redis.call('EXISTS', jk) == 1)
  leaves(id)
  if hash then
    local att = tonumber(row[2]) or 0
    local refunds = tonumber(string.match(lanevals[id] or '', '^[0-3]:([0-9]+):')) or 0
    local text = 'lease expired'
    if row[1] == 'cancelling' then text = 'cancelled' end
    if text == 'cancelled' or max > 0 and att - refunds >= max then
      redis.call('HSET', jk, 'state', 'dead')
      toDead[#toDead + 1] = 0
      toDead[#toDead + 1] = id
      dead[#dead + 1] = id
    else
      redis.call('HSET', jk, 'state', 'pending')
      if not tolane(id) then
        toPending[#toPending + 1] = 0
        toPending[#toPending + 1] = id
      end
      requeued[#requeued + 1] = id
    end
    -- The failure history (FORMAT failure). A key of another type (or, on a node migrating the
    -- slot, one the node does not hold) refuses the RPUSH alone, which pcall keeps so.
    local ek = base .. 'errors:' .. id
    local pushed = redis.pcall('RPUSH', ek, string.format('%d %d ', att, now) .. text)
    if type(pushed) == 'number' then redis.call('LTRIM', ek, -10, -1) end
  elseif lanevals[id] then
    redis.call('HDEL', base .. 'joblane', id) -- the row is gone: so is its lane's field
  end
end
for i = 1, #expired, 1000 do
  redis.call('ZREM', KEYS[1], unpack(expired, i, math.min(i + 999, #expired)))
end
for i = 1, #toPending, 2000 do
  redis.call('ZADD', KEYS[2], unpack(toPending, i, math.min(i + 1999, #toPending)))
end
for i = 1, #toDead, 2000 do
  redis.call('ZADD', KEYS[3], unpack(toDead, i, math.min(i + 1999, #toDead)))
end
free()
if #dead > 0 then trimdead(meta[3], dead) end
if #requeued > 0 and meta[2] ~= '1' then
  redis.call('LPUSH', KEYS[5], '1')
  redis.call('LTRIM', KEYS[5], 0, 15)
end
return {requeued, dead}
