-- periodic_remove: delete a periodic schedule: its row and its name in the queue's index. Jobs
-- it already enqueued are ordinary jobs and stay.
--
-- KEYS[1]  emq:{<q>}:periodics          score-0 set of the queue's schedule names
-- KEYS[2]  emq:{<q>}:periodic:<name>    the schedule's row (FORMAT periodic)
-- FORMAT   periodic see periodic_upsert.lua
-- REPLY    1 when the schedule existed (row or index entry), 0 when it did not
-- ERROR    EMQKEYS    the KEYS are not one queue's periodics and one schedule row
-- ERROR    EMQARGS    an ARGV is given
-- ERROR    EMQTYPE    a key holds another type
local base = string.match(KEYS[1] or '', '^(emq:{[0-9A-Za-z_.%-]+}:)periodics$')
local name = string.match(KEYS[2] or '', '^emq:{[0-9A-Za-z_.%-]+}:periodic:([0-9A-Za-z_.%-]+)$')
if #KEYS ~= 2 or not base or #base > 71 or not name or #name > 64 or KEYS[2] ~= base .. 'periodic:' .. name then
  return redis.error_reply('EMQKEYS expected emq:{<q>}:periodics, periodic:<name> of one queue')
end
if #ARGV ~= 0 then return redis.error_reply('EMQARGS expected no ARGV') end
local function typeerr(key, got, want)
  if got ~= 'none' and got ~= want then return 'EMQTYPE ' .. key .. ' holds a ' .. got .. ', not a ' .. want end
end
local e = typeerr(KEYS[1], redis.call('TYPE', KEYS[1])['ok'], 'zset')
  or typeerr(KEYS[2], redis.call('TYPE', KEYS[2])['ok'], 'hash')
if e then return redis.error_reply(e) end
local n = redis.call('DEL', KEYS[2]) + redis.call('ZREM', KEYS[1], name)
if n > 0 then return 1 end
return 0
