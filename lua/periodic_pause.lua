-- periodic_pause: pause or resume one periodic schedule. A paused schedule fires no tick. Resume
-- moves last to the server's TIME (when that is later), so the ticks that fell during the pause
-- never fire: they were not missed, they were not wanted.
--
-- KEYS[1]  emq:{<q>}:periodic:<name>    hash; field paused is set to "1" or deleted
-- ARGV[1]  pause                        "1" to pause, "0" to resume
-- REPLY    1 when the schedule changed state, 0 when it was already paused (or running)
-- ERRORS   EMQNOSCHED <name> when the schedule has no row; EMQKEYS when KEYS[1] is not a
--          schedule row; EMQARGS when ARGV[1] is neither "1" nor "0"; EMQTYPE when the row holds
--          another type or no integer last
local base = string.match(KEYS[1], '^(emq:{[%w_.%-]+}:)periodic:[%w_.%-]+$')
if not base or #base > 71 or #KEYS[1] - #base - 9 > 64 then
  return redis.error_reply('EMQKEYS expected emq:{<q>}:periodic:<name>')
end
local name = string.sub(KEYS[1], #base + 10)
if #ARGV ~= 1 or (ARGV[1] ~= '1' and ARGV[1] ~= '0') then
  return redis.error_reply('EMQARGS ARGV[1] must be 1 (pause) or 0 (resume)')
end
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'none' then return redis.error_reply('EMQNOSCHED ' .. name) end
if kind ~= 'hash' then return redis.error_reply('EMQTYPE ' .. KEYS[1] .. ' holds a ' .. kind .. ', not a hash') end
local row = redis.call('HMGET', KEYS[1], 'paused', 'last')
local last = row[2] and #row[2] <= 15 and string.match(row[2], '^%d+$') and tonumber(row[2])
if not last then return redis.error_reply('EMQTYPE ' .. KEYS[1] .. ' holds no integer last') end
local paused = row[1] == '1'
if ARGV[1] == '1' then
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
