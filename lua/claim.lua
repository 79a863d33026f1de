-- claim: pop up to count lex-oldest pending jobs, mint each one's fencing token, lease them on
-- the server clock.
--
-- The seed's claim (R0.2.3 §2), move for move in its effects: ZPOPMIN takes the lex-oldest ids
-- (score 0, so lex order is mint order), attempts + 1 is the token, state becomes active, and
-- TIME plus lease_ms lands in the active set. Additions: up to count jobs in one call; a paused
-- queue refuses; due scheduled jobs are promoted first, at most promote_limit of them. Each row
-- costs one read (its attempts and payload) and one write (state and the new attempts in one
-- HSET); the active set takes every claimed id in one ZADD. The job-row prefix is derived
-- from the first key by the grammar instead of being passed in ARGV, so no caller can point
-- the script at a row outside the queue's hash tag. An id whose row is missing, is not a
-- hash, holds neither attempts nor payload, or holds an attempts that is not a decimal
-- integer cannot be worked: it is dropped from the set it was taken from.
--
-- KEYS[1]  emq:{<q>}:pending            score-0 set; lex order is mint order
-- KEYS[2]  emq:{<q>}:active             scored by lease deadline (FORMAT lease)
-- KEYS[3]  emq:{<q>}:schedule           scored by run-at (ms); due ids move to pending first
-- KEYS[4]  emq:{<q>}:meta               hash; field paused = "1" refuses the claim
-- ARGV[1]  lease_ms       uint[1,999999999999999]  lease length in ms from server TIME. The
--          Go bus passes ClaimOpts.Lease, else Config.Lease (default 30000, 30 s); its worker
--          passes WorkerConfig.Lease (default Config.Lease)
-- ARGV[2]  count          uint[1,999999999999999]  how many jobs to claim at most
-- ARGV[3]  promote_limit  uint[0,999999999999999]  how many due scheduled jobs (run-at <=
--          server TIME) to promote before claiming, oldest run-at first; 0 promotes none. The
--          Go bus passes ClaimOpts.PromoteLimit, else Config.PromoteLimit (default 100)
-- DERIVES  emq:{<q>}:job:<id>           each job's row: KEYS[1] up to its type, "job:", the id
-- DERIVES  emq:{<q>}:joblane            read: exists (FORMAT lanes)
-- DERIVES  emq:{<q>}:flow               read: exists
-- DERIVES  emq:{<q>}:laneready          read: exists
-- FORMAT   jobid    see enqueue.lua
-- FORMAT   envelope see enqueue.lua
-- FORMAT   lanes    see laneclaim.lua
-- FORMAT   servertime  every time a script reads is the server's TIME, as milliseconds:
--          seconds * 1000 + floor(microseconds / 1000). Lease deadlines (active) and run-ats
--          (schedule) are such milliseconds; no client clock takes part in a lease. A client
--          that checks a deadline brackets its call with TIME before and after.
-- FORMAT   lease    a claimed job's id is in active, scored by its lease deadline: server TIME
--          + lease_ms at its claim or its last extend. The lease ran out when the deadline is
--          <= server TIME: reap then moves the job back to pending (or to dead when its
--          attempts reached the maximum), and the next claim mints a newer token, which fences
--          out the old holder. complete, completemany, completeclaim, fail and snooze do not
--          read the deadline: a lease that ran out but was not yet reaped still completes.
-- REPLY    {} when pending is empty; else {id, payload, attempts, id, payload, attempts, ...}:
--          one triple per claimed job, oldest first: the JOB id, the payload bytes, and the new
--          attempts count (an integer), which is the fencing token of this claim
-- ERROR    EMQKEYS    the KEYS are not one queue's pending, active, schedule, meta
-- ERROR    EMQARGS    an ARGV does not meet its rule, or the count of ARGV is not 3
-- ERROR    EMQTYPE    a key holds another type
-- ERROR    EMQPAUSED  the queue is paused (nothing is written)
-- ERROR    EMQLANES   the queue keeps lane state (joblane, flow or laneready exists: lanes,
--          priorities or a rate): nothing is written; claim it with laneclaim
local base = string.match(KEYS[1] or '', '^(emq:{[0-9A-Za-z_.%-]+}:)pending$')
if #KEYS ~= 4 or not base or #base > 71 or KEYS[2] ~= base .. 'active' or KEYS[3] ~= base .. 'schedule' or KEYS[4] ~= base .. 'meta' then
  return redis.error_reply('EMQKEYS expected emq:{<q>}:pending, active, schedule, meta of one queue')
end
local function uint(s, lo)
  if s and #s <= 15 and string.match(s, '^[0-9]+$') and tonumber(s) >= lo then return tonumber(s) end
end
if #ARGV ~= 3 then return redis.error_reply('EMQARGS expected 3 ARGV: lease_ms, count, promote_limit') end
local lease, count, plimit = uint(ARGV[1], 1), uint(ARGV[2], 1), uint(ARGV[3], 0)
if not lease then return redis.error_reply('EMQARGS lease_ms must be an integer in [1, 999999999999999]') end
if not count then return redis.error_reply('EMQARGS count must be an integer in [1, 999999999999999]') end
if not plimit then return redis.error_reply('EMQARGS promote_limit must be an integer in [0, 999999999999999]') end
local function typeerr(key, got, want)
  if got ~= 'none' and got ~= want then return 'EMQTYPE ' .. key .. ' holds a ' .. got .. ', not a ' .. want end
end
-- Each key's type is checked once per call, before the first write: pending and active by
-- TYPE; meta and schedule by the read the claim needs anyway, which fails on another type.
local e = typeerr(KEYS[1], redis.call('TYPE', KEYS[1])['ok'], 'zset')
  or typeerr(KEYS[2], redis.call('TYPE', KEYS[2])['ok'], 'zset')
if e then return redis.error_reply(e) end
local paused = redis.pcall('HGET', KEYS[4], 'paused')
if type(paused) == 'table' and paused['err'] then
  return redis.error_reply(typeerr(KEYS[4], redis.call('TYPE', KEYS[4])['ok'], 'hash') or paused['err'])
end
if paused == '1' then return redis.error_reply('EMQPAUSED the queue is paused') end
-- lanes: a queue with lane state is claimed by laneclaim (FORMAT lanes, see laneclaim.lua).
if redis.call('EXISTS', base .. 'joblane', base .. 'flow', base .. 'laneready') > 0 then
  return redis.error_reply('EMQLANES the queue has lanes, priorities or a rate: claim it with laneclaim')
end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local due = {}
if plimit > 0 then
  due = redis.pcall('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, plimit)
  if due['err'] then
    return redis.error_reply(typeerr(KEYS[3], redis.call('TYPE', KEYS[3])['ok'], 'zset') or due['err'])
  end
else
  e = typeerr(KEYS[3], redis.call('TYPE', KEYS[3])['ok'], 'zset')
  if e then return redis.error_reply(e) end
end
-- Promote: the due ids leave schedule and join pending in one ZREM and one ZADD per 1000
-- (unpack's bound); a row that is not a hash (or is missing) is dropped.
if #due > 0 then
  local add = {}
  for _, id in ipairs(due) do
    local jk = base .. 'job:' .. id
    if redis.call('TYPE', jk)['ok'] == 'hash' then
      redis.call('HSET', jk, 'state', 'pending')
      add[#add + 1] = 0
      add[#add + 1] = id
    end
  end
  for i = 1, #due, 1000 do
    redis.call('ZREM', KEYS[3], unpack(due, i, math.min(i + 999, #due)))
  end
  for i = 1, #add, 2000 do
    redis.call('ZADD', KEYS[1], unpack(add, i, math.min(i + 1999, #add)))
  end
end
-- Claim: one read (HMGET attempts, payload) and one write (HSET state, attempts) per row, then
-- one ZADD of every claimed id into active per 1000. The token is the row's attempts + 1.
local out, add = {}, {}
local popped = redis.call('ZPOPMIN', KEYS[1], count)
local deadline = now + lease
for i = 1, #popped, 2 do
  local id = popped[i]
  local jk = base .. 'job:' .. id
  local row = redis.pcall('HMGET', jk, 'attempts', 'payload')
  local att
  if not row['err'] and (row[1] or row[2]) then
    if not row[1] then
      att = 1
    elseif string.match(row[1], '^[0-9]+$') and #row[1] <= 15 then
      att = tonumber(row[1]) + 1
    end
  end
  if att then
    redis.call('HSET', jk, 'state', 'active', 'attempts', string.format('%d', att))
    add[#add + 1] = deadline
    add[#add + 1] = id
    out[#out + 1] = id
    out[#out + 1] = row[2]
    out[#out + 1] = att
  end
end
for i = 1, #add, 2000 do
  redis.call('ZADD', KEYS[2], unpack(add, i, math.min(i + 1999, #add)))
end
return out
