-- pause: stop a queue from handing out work. Claims answer EMQPAUSED until resume; producers
-- may still enqueue, and housekeeping (promote, reap) still runs.
--
-- KEYS[1]  emq:{<q>}:meta               hash; field paused is set to "1"
-- REPLY    1 when the queue was running, 0 when it was already paused
-- ERROR    EMQKEYS    KEYS[1] is not a queue's meta hash
-- ERROR    EMQARGS    an ARGV is given
-- ERROR    EMQTYPE    the key holds another type
local base = string.match(KEYS[1] or '', '^(emq:{[0-9A-Za-z_.%-]+}:)meta$')
if #KEYS ~= 1 or not base or #base > 71 then return redis.error_reply('EMQKEYS expected emq:{<q>}:meta') end
if #ARGV ~= 0 then return redis.error_reply('EMQARGS expected no ARGV') end
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'hash' then return redis.error_reply('EMQTYPE ' .. KEYS[1] .. ' holds a ' .. kind .. ', not a hash') end
if redis.call('HGET', KEYS[1], 'paused') == '1' then return 0 end
redis.call('HSET', KEYS[1], 'paused', '1')
return 1
