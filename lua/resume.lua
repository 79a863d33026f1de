-- resume: let a paused queue hand out work again. One wake marker is pushed so that idle
-- workers look at once: "1" when jobs are pending, else "s" when jobs are scheduled (an enqueue
-- while paused pushes no marker, so the workers' due timers may not know the schedule's head).
--
-- KEYS[1]  emq:{<q>}:meta               hash; field paused is deleted
-- KEYS[2]  emq:{<q>}:pending            score-0 set; read: is anything pending
-- KEYS[3]  emq:{<q>}:wake               list of wake-up markers (FORMAT wake)
-- KEYS[4]  emq:{<q>}:schedule           scored by run-at; read: is anything scheduled
-- DERIVES  emq:{<q>}:laneready          read: does a lane have waiting work (FORMAT lanes)
-- DERIVES  emq:{<q>}:urgent             read: is a job of priority 1 to 3 waiting
-- FORMAT   wake     see enqueue.lua
-- FORMAT   lanes    see laneclaim.lua
-- REPLY    1 when the queue was paused, 0 when it was already running
-- ERROR    EMQKEYS    the KEYS are not one queue's meta, pending, wake, schedule
-- ERROR    EMQARGS    an ARGV is given
-- ERROR    EMQTYPE    a key holds another type
local base = string.match(KEYS[1] or '', '^(emq:{[0-9A-Za-z_.%-]+}:)meta$')
if #KEYS ~= 4 or not base or #base > 71 or KEYS[2] ~= base .. 'pending' or KEYS[3] ~= base .. 'wake'
  or KEYS[4] ~= base .. 'schedule' then
  return redis.error_reply('EMQKEYS expected emq:{<q>}:meta, pending, wake, schedule of one queue')
end
if #ARGV ~= 0 then return redis.error_reply('EMQARGS expected no ARGV') end
local function typeerr(key, got, want)
  if got ~= 'none' and got ~= want then return 'EMQTYPE ' .. key .. ' holds a ' .. got .. ', not a ' .. want end
end
local e = typeerr(KEYS[1], redis.call('TYPE', KEYS[1])['ok'], 'hash')
  or typeerr(KEYS[2], redis.call('TYPE', KEYS[2])['ok'], 'zset')
  or typeerr(KEYS[3], redis.call('TYPE', KEYS[3])['ok'], 'list')
  or typeerr(KEYS[4], redis.call('TYPE', KEYS[4])['ok'], 'zset')
if e then return redis.error_reply(e) end
if redis.call('HGET', KEYS[1], 'paused') ~= '1' then return 0 end
redis.call('HDEL', KEYS[1], 'paused')
local marker = (redis.call('EXISTS', KEYS[2], base .. 'laneready', base .. 'urgent') > 0 and '1') or (redis.call('ZCARD', KEYS[4]) > 0 and 's')
if marker then
  redis.call('LPUSH', KEYS[3], marker)
  redis.call('LTRIM', KEYS[3], 0, 15)
end
return 1
