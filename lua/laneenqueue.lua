-- laneenqueue: add one job or a batch of jobs of one lane and one priority to a queue, all or
-- nothing; enqueue's semantics, with the lane and the priority kept in joblane.
--
-- Each job gets a row of exactly three fields (state, attempts 0, payload). A job that is
-- ready now waits in the set its lane and priority name (FORMAT lanes): urgent for priority 1
-- to 3, the lane's lanepending:<lane> for priority 0, pending for neither; a lane that gets
-- jobs joins laneready at the virtual clock. A job with a later run-at goes to schedule, and
-- promote sends it to its set when it falls due. With lane "" and priority 0 the call is
-- enqueue's, move for move. Idempotency keys, payload limits, run-ats and wake markers are
-- enqueue's. Every check runs before the first write, so a refused call writes nothing.
--
-- KEYS[1]  emq:{<q>}:pending            score-0 set: the jobs without a lane, priority 0
-- KEYS[2]  emq:{<q>}:schedule           scored by run-at (ms, server clock); its head is read
--          when the call schedules its jobs
-- KEYS[3]  emq:{<q>}:meta               hash; read: paused = "1" suppresses the wake markers
-- KEYS[4]  emq:{<q>}:wake               list of wake-up markers (FORMAT wake)
-- KEYS[5]  emq:{<q>}:flow               hash (FORMAT lanes); fields vt (read) and waiting
-- KEYS[6]  emq:{<q>}:laneready          the lanes with waiting work, by virtual time
-- KEYS[7]  emq:{<q>}:joblane            hash: JOB id -> FORMAT joblane
-- KEYS[8]  emq:{<q>}:urgent             waiting jobs of priority 1..3, score -priority
-- ARGV[1]  at_ms        uint[0,999999999999999]  as enqueue's: run-at in unix ms, 0 when not
--          given
-- ARGV[2]  delay_ms     uint[0,999999999999999]  as enqueue's: when at_ms is 0, run-at =
--          server TIME + delay_ms
-- ARGV[3]  uniq_ttl_ms  uint[0,999999999999999]  as enqueue's: the guards' lifetime
-- ARGV[4]  max_payload  uint[0,999999999999999]  as enqueue's: the largest payload, 0 = the
--          hard ceiling of 536870912 bytes
-- ARGV[5]  lane         name?  the lane of every job of the call, "" for none. The Go bus
--          passes EnqueueOpts.Lane
-- ARGV[6]  priority     uint[0,3]  the priority of every job of the call: 0 (the default)
--          to 3, the most urgent. The Go bus passes EnqueueOpts.Priority
-- ARGV[7]  id*          jobid  a starred ARGV repeats: ARGV[7], [8], [9] describe the first
--          job, [10], [11], [12] the second, and so on (one job at least); as enqueue's
-- ARGV[8]  payload*     bytes  the job's payload, stored as it is (FORMAT envelope)
-- ARGV[9]  uniq_key*    id?    the job's idempotency key, "" for none
-- DERIVES  emq:{<q>}:job:<id>           each new job's row: KEYS[1] up to its type, "job:", id
-- DERIVES  emq:{<q>}:uniq:<key>         each key's guard: KEYS[1] up to its type, "uniq:", key
-- DERIVES  emq:{<q>}:lanepending:<lane> the lane's waiting jobs: KEYS[1] up to its type,
--          "lanepending:", the lane
-- FORMAT   jobid    see enqueue.lua
-- FORMAT   envelope see enqueue.lua
-- FORMAT   wake     see enqueue.lua
-- FORMAT   lanes    see laneclaim.lua
-- FORMAT   joblane  see laneclaim.lua
-- REPLY    {{id, created}, ...}: as enqueue's, one pair per job, in order
-- ERROR    EMQKEYS    the KEYS are not one queue's pending, schedule, meta, wake, flow,
--          laneready, joblane, urgent
-- ERROR    EMQARGS    an ARGV does not meet its rule, the count is not 6 + 3n, an id repeats
--          in the call, or a uniq_key is given with uniq_ttl_ms 0
-- ERROR    EMQTOOBIG  a payload is longer than max_payload (or the hard ceiling)
-- ERROR    EMQEXISTS  a job row with one of the ids exists
-- ERROR    EMQTYPE    a key holds another type, a guard holds no JOB id, or flow's waiting or vt is not a number
local base = string.match(KEYS[1] or '', '^(emq:{[0-9A-Za-z_.%-]+}:)pending$')
if #KEYS ~= 8 or not base or #base > 71 or KEYS[2] ~= base .. 'schedule' or KEYS[3] ~= base .. 'meta'
  or KEYS[4] ~= base .. 'wake' or KEYS[5] ~= base .. 'flow' or KEYS[6] ~= base .. 'laneready'
  or KEYS[7] ~= base .. 'joblane' or KEYS[8] ~= base .. 'urgent' then
  return redis.error_reply('EMQKEYS expected emq:{<q>}:pending, schedule, meta, wake, flow, laneready, joblane, urgent of one queue')
end
local function uint(s, lo, hi)
  if #s <= 15 and string.match(s, '^[0-9]+$') then
    local n = tonumber(s)
    if n >= lo and n <= hi then return n end
  end
end
local function isjob(s)
  return #s == 30 and string.match(s, '^JOB_[0-7][0-9A-HJKMNP-TV-Z]+$') ~= nil
end
local MAX, CEILING = 999999999999999, 536870912
local at, delay, ttl, maxp = uint(ARGV[1] or '', 0, MAX), uint(ARGV[2] or '', 0, MAX), uint(ARGV[3] or '', 0, MAX), uint(ARGV[4] or '', 0, MAX)
if not at then return redis.error_reply('EMQARGS at_ms must be an integer in [0, 999999999999999]') end
if not delay then return redis.error_reply('EMQARGS delay_ms must be an integer in [0, 999999999999999]') end
if not ttl then return redis.error_reply('EMQARGS uniq_ttl_ms must be an integer in [0, 999999999999999]') end
if not maxp then return redis.error_reply('EMQARGS max_payload must be an integer in [0, 999999999999999]') end
if maxp == 0 or maxp > CEILING then maxp = CEILING end
local lane, prio = ARGV[5] or '', uint(ARGV[6] or '', 0, 3)
if #lane > 64 or string.find(lane, '[^0-9A-Za-z_.%-]') then
  return redis.error_reply('EMQARGS lane must be "" or 1 to 64 bytes of [A-Za-z0-9_.-]')
end
if not prio then return redis.error_reply('EMQARGS priority must be an integer in [0, 3]') end
local n = (#ARGV - 6) / 3
if n < 1 or n ~= math.floor(n) then
  return redis.error_reply('EMQARGS expected 6 ARGV then id, payload, uniq_key per job')
end
-- Every argument, before any key is read.
local ids = {}
for i = 1, n do
  local j = 7 + 3 * (i - 1)
  local id, payload, key = ARGV[j], ARGV[j + 1], ARGV[j + 2]
  if not isjob(id) then return redis.error_reply('EMQARGS ARGV[' .. j .. '] is not a JOB id') end
  if ids[id] then return redis.error_reply('EMQARGS ARGV[' .. j .. '] repeats id ' .. id) end
  ids[id] = true
  if key ~= '' then
    if #key > 512 or string.find(key, '[%z\1-\31\127]') then
      return redis.error_reply('EMQARGS ARGV[' .. (j + 2) .. '] is not 1 to 512 bytes without control bytes')
    end
    if ttl < 1 then return redis.error_reply('EMQARGS uniq_ttl_ms must be > 0 when a uniq_key is given') end
  end
  if #payload > maxp then
    return redis.error_reply('EMQTOOBIG ARGV[' .. (j + 1) .. '] is ' .. #payload .. ' bytes, more than max_payload ' .. maxp)
  end
end
local function typeerr(key, got, want)
  if got ~= 'none' and got ~= want then return 'EMQTYPE ' .. key .. ' holds a ' .. got .. ', not a ' .. want end
end
local lp = base .. 'lanepending:' .. lane
local e = typeerr(KEYS[1], redis.call('TYPE', KEYS[1])['ok'], 'zset')
  or typeerr(KEYS[2], redis.call('TYPE', KEYS[2])['ok'], 'zset')
  or typeerr(KEYS[3], redis.call('TYPE', KEYS[3])['ok'], 'hash')
  or typeerr(KEYS[4], redis.call('TYPE', KEYS[4])['ok'], 'list')
  or typeerr(KEYS[5], redis.call('TYPE', KEYS[5])['ok'], 'hash')
  or typeerr(KEYS[6], redis.call('TYPE', KEYS[6])['ok'], 'zset')
  or typeerr(KEYS[7], redis.call('TYPE', KEYS[7])['ok'], 'hash')
  or typeerr(KEYS[8], redis.call('TYPE', KEYS[8])['ok'], 'zset')
if not e and lane ~= '' then e = typeerr(lp, redis.call('TYPE', lp)['ok'], 'zset') end
if e then return redis.error_reply(e) end
-- flow's waiting (which HINCRBY moves) and vt (a ZADD score): values the calls after the
-- first write could not take refuse the call here.
local fv = redis.call('HMGET', KEYS[5], 'waiting', 'vt')
local vt = fv[2] and tonumber(fv[2])
if fv[1] and not (#fv[1] <= 18 and string.match(fv[1], '^%-?[0-9]+$')) or fv[2] and (not vt or vt ~= vt) then
  return redis.error_reply('EMQTYPE ' .. KEYS[5] .. ' holds a waiting that is not an integer or a vt that is not a number')
end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local runat = at
if runat == 0 then runat = now + delay end
local ready = runat <= now
-- Pass 1: the rows and guards, read; no write.
local out, byKey = {}, {}
for i = 1, n do
  local j = 7 + 3 * (i - 1)
  local id, key = ARGV[j], ARGV[j + 2]
  local jk = base .. 'job:' .. id
  if redis.call('EXISTS', jk) == 1 then return redis.error_reply('EMQEXISTS ' .. jk .. ' exists') end
  out[i] = {id, 1}
  if key ~= '' then
    if byKey[key] then
      out[i] = {byKey[key], 0}
    else
      local gk = base .. 'uniq:' .. key
      e = typeerr(gk, redis.call('TYPE', gk)['ok'], 'string')
      if e then return redis.error_reply(e) end
      local held = redis.call('GET', gk)
      if held then
        if not isjob(held) then return redis.error_reply('EMQTYPE ' .. gk .. ' holds no JOB id') end
        out[i] = {held, 0}
        byKey[key] = held
      else
        byKey[key] = id
      end
    end
  end
end
-- A scheduled call moves the schedule's head earlier when its run-at is before the head's.
local earlier = false
if not ready then
  local head = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  earlier = #head == 0 or runat < tonumber(head[2])
end
-- Pass 2: the writes.
local stamp = (lane ~= '' or prio > 0) and (prio .. ':0:' .. lane)
local woke, scheduled, added = false, false, 0
for i = 1, n do
  if out[i][2] == 1 then
    local j = 7 + 3 * (i - 1)
    local id, key = ARGV[j], ARGV[j + 2]
    local jk = base .. 'job:' .. id
    if ready then
      redis.call('HSET', jk, 'state', 'pending', 'attempts', 0, 'payload', ARGV[j + 1])
      if prio > 0 then
        redis.call('ZADD', KEYS[8], -prio, id)
      elseif lane ~= '' then
        redis.call('ZADD', lp, 0, id)
        added = added + 1
      else
        redis.call('ZADD', KEYS[1], 0, id)
      end
      woke = true
    else
      redis.call('HSET', jk, 'state', 'scheduled', 'attempts', 0, 'payload', ARGV[j + 1])
      redis.call('ZADD', KEYS[2], runat, id)
      scheduled = true
    end
    if stamp then redis.call('HSET', KEYS[7], id, stamp) end
    if key ~= '' then
      local gk = base .. 'uniq:' .. key
      redis.call('SET', gk, id, 'PX', ttl)
    end
  end
end
if added > 0 then
  redis.call('HINCRBY', KEYS[5], 'waiting', added)
  redis.call('ZADD', KEYS[6], 'NX', tonumber(redis.call('HGET', KEYS[5], 'vt')) or 0, lane)
end
local marker = (woke and '1') or (scheduled and earlier and 's')
if marker and redis.call('HGET', KEYS[3], 'paused') ~= '1' then
  redis.call('LPUSH', KEYS[4], marker)
  redis.call('LTRIM', KEYS[4], 0, 15)
end
return out
