-- periodic_upsert: declare a periodic schedule of a queue, or update its declaration.
--
-- A new schedule's row gets its spec, its payload and last = the server's TIME, so that no tick
-- at or before the declaration ever fires; its name joins the queue's index. On an existing row,
-- spec and payload are rewritten when either differs, and paused is kept, so any number of
-- processes may declare the same schedule at once, at every start, and it fires as if declared
-- once. last is kept when the spec is the same; a changed spec starts afresh as a new one
-- does: last moves to the server's TIME when that is later, so no tick of the new spec at or
-- before the update fires (they were never the schedule's), and a tick of the old one still
-- due then is passed over. The spec is opaque here: the clients that run the scheduler read it. Every
-- check runs before the first write, so a refused call writes nothing.
--
-- KEYS[1]  emq:{<q>}:periodics          score-0 set of the queue's schedule names
-- KEYS[2]  emq:{<q>}:periodic:<name>    the schedule's row (FORMAT periodic)
-- ARGV[1]  spec         bytes  the schedule's declaration, stored as it is; it must not be
--          empty. The Go bus writes JSON (FORMAT periodic)
-- ARGV[2]  payload      bytes  the payload of every job a tick enqueues, stored as it is
--          (FORMAT envelope)
-- ARGV[3]  max_payload  uint[0,999999999999999]  a payload longer than this many bytes
--          refuses the call; 0 = no limit of the caller's. Whatever is passed, a payload over
--          536870912 bytes (512 MiB, the hard ceiling of enqueue) is refused. The Go bus passes
--          Config.MaxPayload (default 524288, 512 KiB)
-- FORMAT   periodic a schedule's row emq:{<q>}:periodic:<name> (<name> is 1 to 64 bytes of
--          [A-Za-z0-9_.-]) holds spec (the declaration, opaque to the scripts), payload (what
--          each tick's job carries), last (unix ms: the newest tick fired or skipped, or the
--          server's TIME at the declaration or at the last resume) and paused ("1", or absent
--          while the schedule runs); its name is a member of emq:{<q>}:periodics, score 0. A
--          tick is a unix ms that the spec names; the ticks T with last < T <= server TIME are
--          due, and the tick is the fence: periodic_fire acts on a tick newer than last only,
--          and moves last to it. The Go bus writes spec as a JSON object with the members cron
--          (five cron fields, six with leading seconds, or a descriptor such as @hourly), zone
--          (the IANA zone cron is read in; UTC when absent), every_ms (a period: ticks fall at
--          its multiples since the Unix epoch), kind (set when payload is a task envelope of
--          that kind), missed ("latest": fire the newest due tick only; "catch_up": fire the
--          newest catch_up due ticks, oldest first; "skip": when more than one tick is due, fire
--          none and skip to the newest) and catch_up, empty members left out; exactly one of
--          cron and every_ms is set. It names a tick's job by the JOB id (FORMAT jobid) whose
--          time part is the tick and whose 80 random bits are the first 80 bits of
--          SHA-256(<q> NUL <name> NUL the tick in decimal), so every process that fires a tick
--          names the same job.
-- FORMAT   envelope see enqueue.lua
-- FORMAT   jobid    see enqueue.lua
-- FORMAT   servertime  see claim.lua
-- REPLY    1 when the schedule was created, 0 when its spec, payload or index entry was updated,
--          -1 when it was declared already exactly so (nothing written)
-- ERROR    EMQKEYS    the KEYS are not one queue's periodics and one schedule row
-- ERROR    EMQARGS    an ARGV does not meet its rule, the count is not 3, or spec is empty
-- ERROR    EMQTOOBIG  the payload is longer than max_payload (or the hard ceiling)
-- ERROR    EMQTYPE    a key holds another type
local base = string.match(KEYS[1] or '', '^(emq:{[0-9A-Za-z_.%-]+}:)periodics$')
local name = string.match(KEYS[2] or '', '^emq:{[0-9A-Za-z_.%-]+}:periodic:([0-9A-Za-z_.%-]+)$')
if #KEYS ~= 2 or not base or #base > 71 or not name or #name > 64 or KEYS[2] ~= base .. 'periodic:' .. name then
  return redis.error_reply('EMQKEYS expected emq:{<q>}:periodics, periodic:<name> of one queue')
end
if #ARGV ~= 3 then return redis.error_reply('EMQARGS expected 3 ARGV: spec, payload, max_payload') end
local spec, payload = ARGV[1], ARGV[2]
local maxp = #ARGV[3] <= 15 and string.match(ARGV[3], '^[0-9]+$') and tonumber(ARGV[3])
if not maxp then return redis.error_reply('EMQARGS max_payload must be an integer in [0, 999999999999999]') end
if #spec < 1 then return redis.error_reply('EMQARGS spec is empty') end
local CEILING = 536870912
if maxp == 0 or maxp > CEILING then maxp = CEILING end
if #payload > maxp then
  return redis.error_reply('EMQTOOBIG ARGV[2] is ' .. #payload .. ' bytes, more than max_payload ' .. maxp)
end
local function typeerr(key, got, want)
  if got ~= 'none' and got ~= want then return 'EMQTYPE ' .. key .. ' holds a ' .. got .. ', not a ' .. want end
end
local e = typeerr(KEYS[1], redis.call('TYPE', KEYS[1])['ok'], 'zset')
  or typeerr(KEYS[2], redis.call('TYPE', KEYS[2])['ok'], 'hash')
if e then return redis.error_reply(e) end
local old = redis.call('HMGET', KEYS[2], 'spec', 'payload', 'last')
local listed = redis.call('ZSCORE', KEYS[1], name)
if old[3] then
  if not listed then redis.call('ZADD', KEYS[1], 0, name) end
  if old[1] == spec and old[2] == payload then
    if listed then return -1 end
    return 0
  end
  if old[1] ~= spec then
    local t = redis.call('TIME')
    local now = t[1] * 1000 + math.floor(t[2] / 1000)
    local last = tonumber(old[3])
    if not last or last < now then
      redis.call('HSET', KEYS[2], 'spec', spec, 'payload', payload, 'last', now)
      return 0
    end
  end
  redis.call('HSET', KEYS[2], 'spec', spec, 'payload', payload)
  return 0
end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('HSET', KEYS[2], 'spec', spec, 'payload', payload, 'last', now)
redis.call('ZADD', KEYS[1], 0, name)
return 1
