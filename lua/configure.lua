-- configure: set or clear a queue's default maximum of attempts, which fail and reap use when
-- the call names none.
--
-- KEYS[1]  emq:{<q>}:meta               hash; field max_attempts
-- ARGV[1]  max_attempts  uint[0,999999999999999]  0 deletes the field (the caller's default
--          applies again)
-- REPLY    the previous value as an integer, 0 when there was none
-- ERROR    EMQKEYS    KEYS[1] is not a queue's meta hash
-- ERROR    EMQARGS    max_attempts does not meet its rule, or the count of ARGV is not 1
-- ERROR    EMQTYPE    the key holds another type
local base = string.match(KEYS[1] or '', '^(emq:{[0-9A-Za-z_.%-]+}:)meta$')
if #KEYS ~= 1 or not base or #base > 71 then return redis.error_reply('EMQKEYS expected emq:{<q>}:meta') end
if #ARGV ~= 1 then return redis.error_reply('EMQARGS expected 1 ARGV: max_attempts') end
local max = ARGV[1]
if #max > 15 or not string.match(max, '^[0-9]+$') then
  return redis.error_reply('EMQARGS max_attempts must be an integer in [0, 999999999999999]')
end
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'hash' then return redis.error_reply('EMQTYPE ' .. KEYS[1] .. ' holds a ' .. kind .. ', not a hash') end
local old = tonumber(redis.call('HGET', KEYS[1], 'max_attempts')) or 0
if tonumber(max) == 0 then
  redis.call('HDEL', KEYS[1], 'max_attempts')
else
  redis.call('HSET', KEYS[1], 'max_attempts', tonumber(max))
end
return old
