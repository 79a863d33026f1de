-- claim: pop up to count lex-oldest pending jobs, mint each one's fencing token, lease them on
-- the server clock.
--
-- The seed's claim (R0.2.3 §2), kept move for move: ZPOPMIN takes the lex-oldest ids (score 0,
-- so lex order is mint order), HINCRBY attempts mints the token, HSET state active marks the
-- row, and TIME plus lease_ms lands in the active set. Additions: up to count jobs in one call;
-- a paused queue refuses; due scheduled jobs are promoted first, at most promote_limit of them.
-- The job-row prefix is derived from KEYS[1] by the grammar instead of being passed in ARGV, so
-- no caller can point the script at a row outside the queue's hash tag. An id whose row is
-- missing or is not a hash cannot be worked: it is dropped from the set it was taken from.
--
-- KEYS[1]  emq:{<q>}:pending            score-0 set; lex order is mint order
-- KEYS[2]  emq:{<q>}:active             scored by lease deadline (ms, server clock)
-- KEYS[3]  emq:{<q>}:schedule           scored by run-at (ms); due ids move to pending first
-- KEYS[4]  emq:{<q>}:meta               hash; field paused = "1" refuses the claim
-- ARGV[1]  lease_ms                     lease length in milliseconds, an integer > 0
-- ARGV[2]  count                        how many jobs to claim at most, an integer > 0
-- ARGV[3]  promote_limit                how many due scheduled jobs (run-at <= server TIME) to
--          promote before claiming, oldest run-at first; 0 promotes none
-- DERIVES  emq:{<q>}:job:<id>           each job's row: KEYS[1] up to its type, "job:", the id
-- REPLY    {} when pending is empty; else {id, payload, attempts, id, payload, attempts, ...}:
--          one triple per claimed job, oldest first: the JOB id, the payload bytes, and the new
--          attempts count, which is the fencing token of this claim. The lease deadline is the
--          server's TIME (ms) at the call plus lease_ms.
-- ERRORS   EMQKEYS when the KEYS are not one queue's pending, active, schedule, meta;
--          EMQARGS when an ARGV is not as declared; EMQTYPE when a key holds another type;
--          EMQPAUSED when the queue is paused (nothing is written)
local base = string.match(KEYS[1], '^(emq:{[%w_.%-]+}:)pending$')
if not base or #base > 71 or KEYS[2] ~= base .. 'active' or KEYS[3] ~= base .. 'schedule' or KEYS[4] ~= base .. 'meta' then
  return redis.error_reply('EMQKEYS expected emq:{<q>}:pending, active, schedule, meta of one queue')
end
local function uint(s)
  if #s <= 15 and string.match(s, '^%d+$') then return tonumber(s) end
end
local lease, count, plimit = uint(ARGV[1]), uint(ARGV[2]), uint(ARGV[3])
if not lease or lease < 1 then return redis.error_reply('EMQARGS lease_ms must be an integer > 0') end
if not count or count < 1 then return redis.error_reply('EMQARGS count must be an integer > 0') end
if not plimit then return redis.error_reply('EMQARGS promote_limit must be an integer >= 0') end
local function typeerr(key, got, want)
  if got ~= 'none' and got ~= want then return 'EMQTYPE ' .. key .. ' holds a ' .. got .. ', not a ' .. want end
end
local e = typeerr(KEYS[1], redis.call('TYPE', KEYS[1])['ok'], 'zset')
  or typeerr(KEYS[2], redis.call('TYPE', KEYS[2])['ok'], 'zset')
  or typeerr(KEYS[3], redis.call('TYPE', KEYS[3])['ok'], 'zset')
  or typeerr(KEYS[4], redis.call('TYPE', KEYS[4])['ok'], 'hash')
if e then return redis.error_reply(e) end
if redis.call('HGET', KEYS[4], 'paused') == '1' then return redis.error_reply('EMQPAUSED the queue is paused') end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
if plimit > 0 then
  local due = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, plimit)
  for _, id in ipairs(due) do
    redis.call('ZREM', KEYS[3], id)
    local jk = base .. 'job:' .. id
    if redis.call('TYPE', jk)['ok'] == 'hash' then
      redis.call('HSET', jk, 'state', 'pending')
      redis.call('ZADD', KEYS[1], 0, id)
    end
  end
end
local out = {}
local popped = redis.call('ZPOPMIN', KEYS[1], count)
for i = 1, #popped, 2 do
  local id = popped[i]
  local jk = base .. 'job:' .. id
  if redis.call('TYPE', jk)['ok'] == 'hash' then
    local att = redis.call('HINCRBY', jk, 'attempts', 1)
    redis.call('HSET', jk, 'state', 'active')
    redis.call('ZADD', KEYS[2], now + lease, id)
    out[#out + 1] = id
    out[#out + 1] = redis.call('HGET', jk, 'payload')
    out[#out + 1] = att
  end
end
return out
