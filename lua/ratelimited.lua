-- ratelimited: hand a claimed job back because the service it calls refused it for now (a
-- partner's 429): the job waits again at once, its attempt is refunded, and its lane is closed
-- for delay_ms, so that no job of the lane is claimed before then.
--
-- Fenced like complete (FORMAT fencing). The job leaves active (its lane frees a slot) and
-- waits in its set (FORMAT lanes) with state pending; attempts is kept (it only grows: the
-- next claim mints token + 1), and the job's refunds (FORMAT joblane) grow by one, so that fail
-- and reap measure attempts minus refunds against the maximum: the refused claim is not spent.
-- The lane is held until server TIME + delay_ms (or later, if it was already held longer): it
-- leaves laneready and waits in lanewait; for a job without a lane the queue's own stream is
-- held (flow field hold). The job's joblane field is written for a job that had none. While a
-- hold runs no wake marker is pushed: nothing is claimable before it ends; the caller learns
-- its end from the reply, and idle workers from their next claim (FORMAT lanes). When nothing
-- is held (delay_ms 0, no longer hold) the job is claimable at once and the wake marker "1" is
-- pushed, as snooze pushes it, unless the queue is paused. A job cancelled while
-- claimed (FORMAT cancel) is refused ("EMQSTALE not active"), as snooze refuses it: its holder
-- fails it instead, or reap sends it to dead when its lease runs out.
--
-- KEYS[1]  emq:{<q>}:active             scored by lease deadline (FORMAT lease)
-- KEYS[2]  emq:{<q>}:pending            score-0 set: where a job without a lane waits
-- KEYS[3]  emq:{<q>}:joblane            hash: JOB id -> FORMAT joblane
-- KEYS[4]  emq:{<q>}:laneactive         hash: lane -> claimed jobs
-- KEYS[5]  emq:{<q>}:laneready          lanes with waiting work, by virtual time
-- KEYS[6]  emq:{<q>}:lanewait           held-back lanes, by the ms they may give work
-- KEYS[7]  emq:{<q>}:flow               hash: field hold (the queue's own stream), vt, waiting
-- KEYS[8]  emq:{<q>}:urgent             waiting jobs of priority 1..3
-- ARGV[1]  id        jobid                 the job's JOB id
-- ARGV[2]  token     fence                 the attempts count the claim returned
-- ARGV[3]  delay_ms  uint[0,86400000]      how long the lane is closed, from server TIME (at
--          most a day); 0 hands the job back without closing anything. The Go worker passes
--          the Delay of the handler's bus.RateLimited error
-- DERIVES  emq:{<q>}:job:<id>           the job's row: KEYS[1] up to its type, "job:", the id
-- DERIVES  emq:{<q>}:lanepending:<lane> where a job of a lane, priority 0, waits
-- DERIVES  emq:{<q>}:meta               hash; read: paused
-- DERIVES  emq:{<q>}:wake               list of wake-up markers (FORMAT wake)
-- FORMAT   jobid    see enqueue.lua
-- FORMAT   servertime  see claim.lua
-- FORMAT   fencing  see complete.lua
-- FORMAT   lease    see claim.lua
-- FORMAT   lanes    see laneclaim.lua
-- FORMAT   joblane  see laneclaim.lua
-- FORMAT   cancel   see cancel.lua
-- FORMAT   wake     see enqueue.lua
-- REPLY    {where, at_ms}: where is "pending"; at_ms is when the job's lane may give work
--          again (server TIME + delay_ms, or the later end of an earlier hold)
-- ERROR    EMQSTALE   no row | not active | token mismatch (FORMAT fencing; nothing written)
-- ERROR    EMQKEYS    the KEYS are not one queue's active, pending, joblane, laneactive,
--          laneready, lanewait, flow, urgent
-- ERROR    EMQARGS    an ARGV does not meet its rule, or the count of ARGV is not 3
-- ERROR    EMQTYPE    a key holds another type (a lane key included) or flow's waiting or vt is not a number: nothing written
local base = string.match(KEYS[1] or '', '^(emq:{[0-9A-Za-z_.%-]+}:)active$')
if #KEYS ~= 8 or not base or #base > 71 or KEYS[2] ~= base .. 'pending' or KEYS[3] ~= base .. 'joblane'
  or KEYS[4] ~= base .. 'laneactive' or KEYS[5] ~= base .. 'laneready' or KEYS[6] ~= base .. 'lanewait'
  or KEYS[7] ~= base .. 'flow' or KEYS[8] ~= base .. 'urgent' then
  return redis.error_reply('EMQKEYS expected emq:{<q>}:active, pending, joblane, laneactive, laneready, lanewait, flow, urgent of one queue')
end
if #ARGV ~= 3 then return redis.error_reply('EMQARGS expected 3 ARGV: id, token, delay_ms') end
local id, token, delay = ARGV[1], ARGV[2], ARGV[3]
if #id ~= 30 or not string.match(id, '^JOB_[0-7][0-9A-HJKMNP-TV-Z]+$') then
  return redis.error_reply('EMQARGS ARGV[1] is not a JOB id')
end
if #token > 15 or not string.match(token, '^[1-9][0-9]*$') then
  return redis.error_reply('EMQARGS ARGV[2] token must be an integer in [1, 999999999999999]')
end
if #delay > 15 or not string.match(delay, '^[0-9]+$') or tonumber(delay) > 86400000 then
  return redis.error_reply('EMQARGS delay_ms must be an integer in [0, 86400000]')
end
delay = tonumber(delay)
local function typeerr(key, got, want)
  if got ~= 'none' and got ~= want then return 'EMQTYPE ' .. key .. ' holds a ' .. got .. ', not a ' .. want end
end
local e = typeerr(KEYS[1], redis.call('TYPE', KEYS[1])['ok'], 'zset')
  or typeerr(KEYS[2], redis.call('TYPE', KEYS[2])['ok'], 'zset')
  or typeerr(KEYS[3], redis.call('TYPE', KEYS[3])['ok'], 'hash')
  or typeerr(KEYS[4], redis.call('TYPE', KEYS[4])['ok'], 'hash')
  or typeerr(KEYS[5], redis.call('TYPE', KEYS[5])['ok'], 'zset')
  or typeerr(KEYS[6], redis.call('TYPE', KEYS[6])['ok'], 'zset')
  or typeerr(KEYS[7], redis.call('TYPE', KEYS[7])['ok'], 'hash')
  or typeerr(KEYS[8], redis.call('TYPE', KEYS[8])['ok'], 'zset')
  or typeerr(base .. 'meta', redis.call('TYPE', base .. 'meta')['ok'], 'hash')
  or typeerr(base .. 'wake', redis.call('TYPE', base .. 'wake')['ok'], 'list')
if e then return redis.error_reply(e) end
local jk = base .. 'job:' .. id
local kind = redis.call('TYPE', jk)['ok']
if kind == 'none' then return redis.error_reply('EMQSTALE no row') end
if kind ~= 'hash' then return redis.error_reply('EMQTYPE ' .. jk .. ' holds a ' .. kind .. ', not a hash') end
local row = redis.call('HMGET', jk, 'state', 'attempts')
if row[1] ~= 'active' then return redis.error_reply('EMQSTALE not active') end
if row[2] ~= token then return redis.error_reply('EMQSTALE token mismatch') end
local p, refunds, lane = string.match(redis.call('HGET', KEYS[3], id) or '', '^([0-3]):([0-9]+):(.*)$')
if not p then p, refunds, lane = '0', '0', '' end
local lp = base .. 'lanepending:' .. lane
if p == '0' and lane ~= '' then
  e = typeerr(lp, redis.call('TYPE', lp)['ok'], 'zset')
  if e then return redis.error_reply(e) end
end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local flow = redis.call('HMGET', KEYS[7], 'hold', 'vt', 'waiting')
-- Values the calls after the first write could not take (a ZADD score, HINCRBY's integer)
-- refuse the call here (FORMAT lanes).
local vt = flow[2] and tonumber(flow[2])
if flow[3] and not (#flow[3] <= 18 and string.match(flow[3], '^%-?[0-9]+$')) or flow[2] and (not vt or vt ~= vt) then
  return redis.error_reply('EMQTYPE ' .. KEYS[7] .. ' holds a waiting that is not an integer or a vt that is not a number')
end
-- Out of active; the lane's slot is free (the wake, if any, is pushed at the end).
redis.call('ZREM', KEYS[1], id)
if lane ~= '' then
  local n = (tonumber(redis.call('HGET', KEYS[4], lane)) or 0) - 1
  if n > 0 then redis.call('HSET', KEYS[4], lane, n) else redis.call('HDEL', KEYS[4], lane) end
end
-- Back to waiting, the attempt refunded.
redis.call('HSET', jk, 'state', 'pending')
redis.call('HSET', KEYS[3], id, p .. ':' .. (tonumber(refunds) + 1) .. ':' .. lane)
if p ~= '0' then
  redis.call('ZADD', KEYS[8], -tonumber(p), id)
elseif lane ~= '' then
  redis.call('ZADD', lp, 0, id)
  redis.call('HINCRBY', KEYS[7], 'waiting', 1)
else
  redis.call('ZADD', KEYS[2], 0, id)
end
-- The lane is held.
local untilMs = now + delay
if lane == '' then
  local hold = tonumber(flow[1])
  if hold and hold > untilMs then untilMs = hold end
  if delay > 0 then
    redis.call('HSET', KEYS[7], 'hold', untilMs)
    redis.call('ZREM', KEYS[5], '')
  end
else
  local held = tonumber(redis.call('ZSCORE', KEYS[6], lane))
  if held and held > untilMs then untilMs = held end
  if delay > 0 then
    redis.call('ZADD', KEYS[6], 'GT', untilMs, lane)
    redis.call('ZREM', KEYS[5], lane)
  elseif not held then
    redis.call('ZADD', KEYS[5], 'NX', tonumber(flow[2]) or 0, lane)
  end
end
if untilMs <= now and redis.call('HGET', base .. 'meta', 'paused') ~= '1' then
  redis.call('LPUSH', base .. 'wake', '1')
  redis.call('LTRIM', base .. 'wake', 0, 15)
end
return {'pending', untilMs}
