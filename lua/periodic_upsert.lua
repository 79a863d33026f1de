-- periodic_upsert: declare a periodic schedule of a queue, or update its declaration.
--
-- A new schedule's row gets its spec, its payload and last = the server's TIME, so that no tick
-- at or before the declaration ever fires; its name joins the queue's index. On an existing row,
-- spec and payload are rewritten when either differs, and last and paused are kept, so any
-- number of processes may declare the same schedule at once, at every start, and it fires as
-- if declared once. The spec is opaque here: the clients that run the scheduler read it.
--
-- KEYS[1]  emq:{<q>}:periodics          score-0 set of the queue's schedule names
-- KEYS[2]  emq:{<q>}:periodic:<name>    hash: spec, payload, last (unix ms), paused ("1" or absent)
-- ARGV[1]  spec                         the schedule's declaration, 1 byte at least; stored as is
-- ARGV[2]  payload                      the payload of every job a tick enqueues
-- ARGV[3]  max_payload                  a payload longer than this many bytes refuses the call;
--          0 = no limit
-- REPLY    1 when the schedule was created, 0 when its spec, payload or index entry was updated,
--          -1 when it was declared already exactly so (nothing written)
-- ERRORS   EMQKEYS when the KEYS are not one queue's periodics and one schedule row (the name is
--          1 to 64 bytes of [A-Za-z0-9_.-]); EMQARGS when an ARGV is not as declared; EMQTOOBIG
--          when the payload is longer than max_payload; EMQTYPE when a key holds another type
local base = string.match(KEYS[1], '^(emq:{[%w_.%-]+}:)periodics$')
if not base or #base > 71 then
  return redis.error_reply('EMQKEYS expected emq:{<q>}:periodics, periodic:<name> of one queue')
end
local name = string.sub(KEYS[2], #base + 10)
if string.sub(KEYS[2], 1, #base + 9) ~= base .. 'periodic:' or #name < 1 or #name > 64 or not string.match(name, '^[%w_.%-]+$') then
  return redis.error_reply('EMQKEYS expected emq:{<q>}:periodics, periodic:<name> of one queue')
end
if #ARGV ~= 3 then return redis.error_reply('EMQARGS expected spec, payload, max_payload') end
local spec, payload = ARGV[1], ARGV[2]
local maxp = #ARGV[3] <= 15 and string.match(ARGV[3], '^%d+$') and tonumber(ARGV[3])
if #spec < 1 then return redis.error_reply('EMQARGS ARGV[1] spec is empty') end
if not maxp then return redis.error_reply('EMQARGS max_payload must be an integer >= 0') end
if maxp > 0 and #payload > maxp then
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
  redis.call('HSET', KEYS[2], 'spec', spec, 'payload', payload)
  return 0
end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('HSET', KEYS[2], 'spec', spec, 'payload', payload, 'last', now)
redis.call('ZADD', KEYS[1], 0, name)
return 1
