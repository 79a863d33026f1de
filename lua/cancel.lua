-- cancel: cancel a job. A waiting job (pending or scheduled) is deleted: its row and its
-- failure history (FORMAT failure) are deleted and its id leaves the set that held it. A
-- claimed job is marked "cancelling" for its holder to stop cooperatively (FORMAT cancel). A
-- dead job is refused (EMQSTATE): purge deletes it. An idempotency guard that named the job
-- lives on until its TTL, so its key still answers the cancelled job's id.
--
-- KEYS[1]  emq:{<q>}:pending            score-0 set
-- KEYS[2]  emq:{<q>}:schedule           scored by run-at (ms, server clock)
-- ARGV[1]  id  jobid                    the job's JOB id
-- DERIVES  emq:{<q>}:job:<id>           the job's row: KEYS[1] up to its type, "job:", the id
-- DERIVES  emq:{<q>}:joblane            the job's lane and priority (FORMAT joblane); read once
--          per call by TYPE, so a queue without lanes pays one command
-- DERIVES  emq:{<q>}:lanepending:<lane> where a waiting job of a lane, priority 0, is
-- DERIVES  emq:{<q>}:urgent             where a waiting job of priority 1 to 3 is
-- DERIVES  emq:{<q>}:flow               field waiting
-- DERIVES  emq:{<q>}:errors:<id>        the job's failure history: KEYS[1] up to its type,
--          "errors:", the id
-- FORMAT   jobid    see enqueue.lua
-- FORMAT   lanes    see laneclaim.lua
-- FORMAT   joblane  see laneclaim.lua
-- FORMAT   failure  see fail.lua
-- FORMAT   cancel   a claimed job (state "active") is cancelled in place: cancel sets its
--          state to "cancelling" and changes nothing else; it stays in active with its lease
--          deadline and attempts. Its holder learns of it at its next extend, which refuses
--          the job with "EMQSTALE cancelled" (its token still matches) and does not renew the
--          lease; the holder then stops the job and fails it: fail sends a cancelling job to
--          dead whatever its backoff and maximum, and records "cancelled" in its failure
--          history instead of the caller's text. A holder that finishes first completes it
--          (complete, completemany and completeclaim retire a cancelling job as an active
--          one). A holder that is gone leaves it to its lease: reap sends an expired
--          cancelling job to dead, recording "cancelled". snooze refuses a cancelling job
--          ("EMQSTALE not active")
-- REPLY    the state the job had: "pending" or "scheduled" (deleted), "active" (now
--          cancelling), or "cancelling" (already cancelling: nothing written)
-- ERROR    EMQNOJOB   <id>: the job has no row
-- ERROR    EMQSTATE   <state> <id>: the job is dead (nothing written)
-- ERROR    EMQKEYS    the KEYS are not one queue's pending, schedule
-- ERROR    EMQARGS    id is not a JOB id, or the count of ARGV is not 1
-- ERROR    EMQTYPE    a key holds another type (a lane key included) or flow's waiting or vt is not a number: nothing written
local base = string.match(KEYS[1] or '', '^(emq:{[0-9A-Za-z_.%-]+}:)pending$')
if #KEYS ~= 2 or not base or #base > 71 or KEYS[2] ~= base .. 'schedule' then
  return redis.error_reply('EMQKEYS expected emq:{<q>}:pending, schedule of one queue')
end
if #ARGV ~= 1 then return redis.error_reply('EMQARGS expected 1 ARGV: id') end
local id = ARGV[1]
if #id ~= 30 or not string.match(id, '^JOB_[0-7][0-9A-HJKMNP-TV-Z]+$') then
  return redis.error_reply('EMQARGS ARGV[1] is not a JOB id')
end
local function typeerr(key, got, want)
  if got ~= 'none' and got ~= want then return 'EMQTYPE ' .. key .. ' holds a ' .. got .. ', not a ' .. want end
end
local jk = base .. 'job:' .. id
local e = typeerr(KEYS[1], redis.call('TYPE', KEYS[1])['ok'], 'zset')
  or typeerr(KEYS[2], redis.call('TYPE', KEYS[2])['ok'], 'zset')
  or typeerr(jk, redis.call('TYPE', jk)['ok'], 'hash')
if e then return redis.error_reply(e) end
local row = redis.call('HMGET', jk, 'state', 'attempts')
local state = row[1]
if not state then return redis.error_reply('EMQNOJOB ' .. id) end
if state == 'cancelling' then return state end
if state ~= 'pending' and state ~= 'scheduled' and state ~= 'active' then return redis.error_reply('EMQSTATE ' .. state .. ' ' .. id) end
-- lanes: one TYPE per call; with lanes, every lane key the call may write is checked first
-- (FORMAT lanes, see laneclaim.lua).
local jl = redis.call('TYPE', base .. 'joblane')['ok']
if jl ~= 'none' and jl ~= 'hash' then return redis.error_reply('EMQTYPE ' .. base .. 'joblane holds a ' .. jl .. ', not a hash') end
local lanes = jl == 'hash' and state ~= 'active' -- a claimed job stays where it is
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
if state == 'active' then
  redis.call('HSET', jk, 'state', 'cancelling')
  return state
end
redis.call('ZREM', KEYS[1], id)
redis.call('ZREM', KEYS[2], id)
redis.call('DEL', jk)
-- lanes: a waiting job of a lane leaves its lane's set; its joblane field goes with the row.
if lanevals[id] then
  local p, lane = string.match(lanevals[id], '^([0-3]):[0-9]+:(.*)$')
  redis.call('ZREM', base .. 'urgent', id)
  if p == '0' and lane ~= '' and redis.call('ZREM', base .. 'lanepending:' .. lane, id) == 1 then
    if redis.call('HINCRBY', base .. 'flow', 'waiting', -1) <= 0 then redis.call('HDEL', base .. 'flow', 'waiting') end
  end
  redis.call('HDEL', base .. 'joblane', id)
end
-- The failure history (FORMAT failure) exists only for a job claimed before (attempts > 0);
-- see complete.lua for the pcall.
if row[2] ~= '0' then redis.pcall('DEL', base .. 'errors:' .. id) end
return state
