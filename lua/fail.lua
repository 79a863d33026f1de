-- fail: hand a claimed job back after a failed attempt: to schedule at server TIME plus the
-- caller's backoff (to pending at once when the backoff is 0), or to dead when its attempts
-- reached the queue's maximum. attempts is kept: it counts claims and only grows. The attempt
-- is recorded in the job's failure history (FORMAT failure) with the caller's error text. A
-- job cancelled while claimed goes to dead, recorded as "cancelled" (FORMAT cancel).
-- A job of a lane frees its lane's slot, and waits again in its lane's set (FORMAT lanes); its
-- refunds (FORMAT joblane) are not counted against the maximum. A job sent to dead past the
-- queue's dead_max deletes the oldest other dead jobs (FORMAT deadmax).
--
-- Fenced like complete (FORMAT fencing). The maximum is max_attempts when it is > 0, else the
-- queue's meta field max_attempts, else default_max_attempts; 0 there means no maximum. A job
-- that goes to pending pushes a wake marker unless the queue is paused (FORMAT wake).
--
-- KEYS[1]  emq:{<q>}:active             scored by lease deadline (FORMAT lease)
-- KEYS[2]  emq:{<q>}:schedule           scored by run-at (ms, server clock)
-- KEYS[3]  emq:{<q>}:pending            score-0 set
-- KEYS[4]  emq:{<q>}:dead               score-0 set
-- KEYS[5]  emq:{<q>}:meta               hash; read: max_attempts, paused, dead_max
-- KEYS[6]  emq:{<q>}:wake               list of wake-up markers (FORMAT wake)
-- ARGV[1]  id                    jobid  the job's JOB id
-- ARGV[2]  token                 fence  the attempts count the claim returned
-- ARGV[3]  backoff_ms            uint[0,999999999999999]  run-at = server TIME + backoff_ms;
--          0 = pending now. The Go bus passes FailOpts.Backoff; its worker passes
--          WorkerConfig.Backoff (default bus.DefaultBackoff) of the attempt, with jitter
-- ARGV[4]  max_attempts          uint[0,999999999999999]  this call's maximum; 0 defers to
--          the queue's meta field max_attempts
-- ARGV[5]  default_max_attempts  uint[0,999999999999999]  the maximum when both above are 0
--          or absent; 0 = none. The Go bus passes Config.MaxAttempts (default 25; 0 when it
--          is negative)
-- ARGV[6]  error                 bytes[0,1024]  the attempt's error text, recorded in the
--          failure history (FORMAT failure); may be empty. The Go bus passes FailOpts.Error,
--          its worker the handler's error text, each cut to 1024 bytes on a UTF-8 boundary
-- DERIVES  emq:{<q>}:job:<id>           the job's row, and those of the dead jobs dead_max
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
-- DERIVES  emq:{<q>}:errors:<id>        the job's failure history, and those of the dead jobs
--          dead_max deletes: KEYS[1] up to its type, "errors:", the id
-- FORMAT   jobid    see enqueue.lua
-- FORMAT   servertime  see claim.lua
-- FORMAT   fencing  see complete.lua
-- FORMAT   wake     see enqueue.lua
-- FORMAT   lease    see claim.lua
-- FORMAT   lanes    see laneclaim.lua
-- FORMAT   joblane  see laneclaim.lua
-- FORMAT   cancel   see cancel.lua
-- FORMAT   deadmax  see configure.lua
-- FORMAT   failure  a job's failure history emq:{<q>}:errors:<JOB id> is a list beside its
--          row (never in it), one entry per failed attempt, oldest first: the attempt (the
--          row's attempts when it failed, decimal), one space, the server TIME of the failure
--          in ms (decimal, FORMAT servertime), one space, then the error text (any bytes, at
--          most 1024, possibly empty). fail appends the caller's text; reap appends "lease
--          expired" for a lease that ran out, and both "cancelled" for a job cancelled while
--          claimed (FORMAT cancel). Each appends with RPUSH, then LTRIM -10 -1: the last 10
--          attempts are kept. complete, completemany, completeclaim, cancel and purge delete
--          the list in the call that deletes the row, with a DEL of its own whose error they
--          ignore (on a node whose slot is being migrated, any command on a key the node does
--          not hold is refused, and the list is then not there to delete); they skip it for a
--          job that cannot have one: completed under token 1, or cancelled with attempts 0.
--          retry keeps the list. lookup returns it
-- REPLY    {where, at_ms}: where is "scheduled" (at_ms = run-at), "pending" (at_ms = server
--          TIME) or "dead" (at_ms = server TIME)
-- ERROR    EMQSTALE   no row | not active | token mismatch (FORMAT fencing; nothing written)
-- ERROR    EMQKEYS    the KEYS are not one queue's active, schedule, pending, dead, meta, wake
-- ERROR    EMQARGS    an ARGV does not meet its rule, or the count of ARGV is not 6
-- ERROR    EMQTYPE    a key holds another type (a lane key included) or flow's waiting or vt is not a number: nothing written
local base = string.match(KEYS[1] or '', '^(emq:{[0-9A-Za-z_.%-]+}:)active$')
if #KEYS ~= 6 or not base or #base > 71 or KEYS[2] ~= base .. 'schedule' or KEYS[3] ~= base .. 'pending' or KEYS[4] ~= base .. 'dead'
  or KEYS[5] ~= base .. 'meta' or KEYS[6] ~= base .. 'wake' then
  return redis.error_reply('EMQKEYS expected emq:{<q>}:active, schedule, pending, dead, meta, wake of one queue')
end
local function uint(s)
  if s and #s <= 15 and string.match(s, '^[0-9]+$') then return tonumber(s) end
end
if #ARGV ~= 6 then return redis.error_reply('EMQARGS expected 6 ARGV: id, token, backoff_ms, max_attempts, default_max_attempts, error') end
local id, token = ARGV[1], ARGV[2]
if #id ~= 30 or not string.match(id, '^JOB_[0-7][0-9A-HJKMNP-TV-Z]+$') then
  return redis.error_reply('EMQARGS ARGV[1] is not a JOB id')
end
if #token > 15 or not string.match(token, '^[1-9][0-9]*$') then
  return redis.error_reply('EMQARGS ARGV[2] token must be an integer in [1, 999999999999999]')
end
local backoff, max, dmax = uint(ARGV[3]), uint(ARGV[4]), uint(ARGV[5])
if not backoff then return redis.error_reply('EMQARGS backoff_ms must be an integer >= 0') end
if not max then return redis.error_reply('EMQARGS max_attempts must be an integer >= 0') end
if not dmax then return redis.error_reply('EMQARGS default_max_attempts must be an integer >= 0') end
if #ARGV[6] > 1024 then return redis.error_reply('EMQARGS error must be at most 1024 bytes') end
local function typeerr(key, got, want)
  if got ~= 'none' and got ~= want then return 'EMQTYPE ' .. key .. ' holds a ' .. got .. ', not a ' .. want end
end
local e = typeerr(KEYS[1], redis.call('TYPE', KEYS[1])['ok'], 'zset')
  or typeerr(KEYS[2], redis.call('TYPE', KEYS[2])['ok'], 'zset')
  or typeerr(KEYS[3], redis.call('TYPE', KEYS[3])['ok'], 'zset')
  or typeerr(KEYS[4], redis.call('TYPE', KEYS[4])['ok'], 'zset')
  or typeerr(KEYS[5], redis.call('TYPE', KEYS[5])['ok'], 'hash')
  or typeerr(KEYS[6], redis.call('TYPE', KEYS[6])['ok'], 'list')
if e then return redis.error_reply(e) end
local jk = base .. 'job:' .. id
local kind = redis.call('TYPE', jk)['ok']
if kind == 'none' then return redis.error_reply('EMQSTALE no row') end
if kind ~= 'hash' then return redis.error_reply('EMQTYPE ' .. jk .. ' holds a ' .. kind .. ', not a hash') end
local row = redis.call('HMGET', jk, 'state', 'attempts')
if row[1] ~= 'active' and row[1] ~= 'cancelling' then return redis.error_reply('EMQSTALE not active') end
if row[2] ~= token then return redis.error_reply('EMQSTALE token mismatch') end
local ek = base .. 'errors:' .. id
e = typeerr(ek, redis.call('TYPE', ek)['ok'], 'list')
if e then return redis.error_reply(e) end
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
local meta = redis.call('HMGET', KEYS[5], 'max_attempts', 'paused', 'dead_max')
if max == 0 then max = tonumber(meta[1]) or dmax end
local refunds = tonumber(string.match(lanevals[id] or '', '^[0-3]:([0-9]+):')) or 0
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
-- The failure history (FORMAT failure): this attempt's entry; the last 10 are kept.
local cancelled = row[1] == 'cancelling' -- FORMAT cancel: dead, whatever the backoff and maximum
local text = ARGV[6]
if cancelled then text = 'cancelled' end
redis.call('RPUSH', ek, string.format('%d %d ', tonumber(token), now) .. text)
redis.call('LTRIM', ek, -10, -1)
redis.call('ZREM', KEYS[1], id)
leaves(id)
free()
if cancelled or max > 0 and tonumber(token) - refunds >= max then
  redis.call('HSET', jk, 'state', 'dead')
  redis.call('ZADD', KEYS[4], 0, id)
  trimdead(meta[3], {id})
  return {'dead', now}
end
if backoff == 0 then
  redis.call('HSET', jk, 'state', 'pending')
  if not tolane(id) then redis.call('ZADD', KEYS[3], 0, id) end
  if meta[2] ~= '1' then
    redis.call('LPUSH', KEYS[6], '1')
    redis.call('LTRIM', KEYS[6], 0, 15)
  end
  return {'pending', now}
end
redis.call('HSET', jk, 'state', 'scheduled')
redis.call('ZADD', KEYS[2], now + backoff, id)
return {'scheduled', now + backoff}
