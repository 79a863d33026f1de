-- periodic_remove: delete a periodic schedule: its row and its name in the queue's index. Jobs
-- it already enqueued are ordinary jobs and stay.
--
-- KEYS[1]  emq:{<q>}:periodics          score-0 set of the queue's schedule names
-- KEYS[2]  emq:{<q>}:periodic:<name>    the schedule's row
-- REPLY    1 when the schedule existed (row or index entry), 0 when it did not
-- ERRORS   EMQKEYS when the KEYS are not one queue's periodics and one schedule row; EMQTYPE
--          when a key holds another type
local base = string.match(KEYS[1], '^(emq:{[%w_.%-]+}:)periodics$')
if not base or #base > 71 then
  return redis.error_reply('EMQKEYS expected emq:{<q>}:periodics, periodic:<name> of one queue')
end
local name = string.sub(KEYS[2], #base + 10)
if string.sub(KEYS[2], 1, #base + 9) ~= base .. 'periodic:' or #name < 1 or #name > 64 or not string.match(name, '^[%w_.%-]+$') then
  return redis.error_reply('EMQKEYS expected emq:{<q>}:periodics, periodic:<name> of one queue')
end
local function typeerr(key, got, want)
  if got ~= 'none' and got ~= want then return 'EMQTYPE ' .. key .. ' holds a ' .. got .. ', not a ' .. want end
end
local e = typeerr(KEYS[1], redis.call('TYPE', KEYS[1])['ok'], 'zset')
  or typeerr(KEYS[2], redis.call('TYPE', KEYS[2])['ok'], 'hash')
if e then return redis.error_reply(e) end
local n = redis.call('DEL', KEYS[2]) + redis.call('ZREM', KEYS[1], name)
if n > 0 then return 1 end
return 0
