-- periodic_pause: pause or resume one periodic schedule. A paused schedule fires no tick. Resume
-- moves last to the server's TIME (when that is later), so the ticks that fell during the pause
-- never fire: they were not missed, they were not wanted. Every check runs before the first
-- write.
--
-- KEYS[1]  emq:{<q>}:periodic:<name>    the schedule's row (FORMAT periodic); field paused is
--          set to "1" or deleted
-- ARGV[1]  pause  uint[0,1]  1 pauses the schedule, 0 resumes it
-- FORMAT   periodic see periodic_upsert.lua
-- FORMAT   servertime  see claim.lua
-- REPLY    1 when the schedule changed state, 0 when it was already paused (or running)
-- ERROR    EMQKEYS    KEYS[1] is not a schedule row
-- ERROR    EMQARGS    ARGV[1] does not meet its rule, or the count of ARGV is not 1
-- ERROR    EMQNOSCHED <name>: the schedule has no row
-- ERROR    EMQTYPE    the row holds another type, or no integer last
local base, name = string.match(KEYS[1] or '', '^(emq:{[0-9A-Za-z_.%-]+}:)periodic:([0-9A-Za-z_.%-]+)$')
if #KEYS ~= 1 or not base or #base > 71 or #name > 64 then
  return redis.error_reply('EMQKEYS expected emq:{<q>}:periodic:<name>')
end
local function uint(s, hi)
  if #s <= 15 and string.match(s, '^[0-9]+$') and tonumber(s) <= hi then return tonumber(s) end
end
if #ARGV ~= 1 then return redis.error_reply('EMQARGS expected 1 ARGV: pause') end
local pause = uint(ARGV[1], 1)
if not pause then return redis.error_reply('EMQARGS pause must be 1 (pause) or 0 (resume)') end
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'none' then return redis.error_reply('EMQNOSCHED ' .. name) end
if kind ~= 'hash' then return redis.error_reply('EMQTYPE ' .. KEYS[1] .. ' holds a ' .. kind .. ', not a hash') end
local row = redis.call('HMGET', KEYS[1], 'paused', 'last')
local last = row[2] and uint(row[2], 999999999999999)
if not last then return redis.error_reply('EMQTYPE ' .. KEYS[1] .. ' holds no integer last') end
local paused = row[1] == '1'
if pause == 1 then
  if paused then return 0 end
  redis.call('HSET', KEYS[1], 'paused', '1')
  return 1
end
if not paused then return 0 end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('HDEL', KEYS[1], 'paused')
if now > last then redis.call('HSET', KEYS[1], 'last', now) end
return 1
