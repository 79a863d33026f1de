-- configure: set or clear a queue's settings, each a field of its meta hash: max_attempts (the
-- maximum of attempts fail and reap use when the call names none) and dead_max (the most dead
-- jobs the queue keeps, FORMAT deadmax). An empty value leaves its setting as it is.
--
-- KEYS[1]  emq:{<q>}:meta               hash; fields max_attempts, dead_max
-- ARGV[1]  max_attempts  uint[0,999999999999999]?  0 deletes the field (the caller's default
--          applies again); "" leaves it
-- ARGV[2]  dead_max      uint[0,999999999999999]?  0 deletes the field (dead jobs are kept until
--          retried or purged); "" leaves it
-- FORMAT   deadmax  a queue's meta field dead_max, when it is an integer > 0, bounds its dead
--          set: a call that sends jobs to dead (fail, reap) and leaves dead holding more than
--          dead_max deletes the oldest other dead jobs (lex order, which is mint order; never
--          one the call sent there) until it holds dead_max, at most 100 more than it sent
--          there: their rows, their failure histories (a DEL of its own whose error it ignores,
--          as complete's) and their joblane fields go, as purge's do. After dead_max is
--          lowered, the set shrinks by up to 100 at each job that dies; purge deletes at once.
--          Absent, 0 or not an integer: no bound
-- REPLY    {max_attempts, dead_max}: each setting's previous value as an integer, 0 when there
--          was none
-- ERROR    EMQKEYS    KEYS[1] is not a queue's meta hash
-- ERROR    EMQARGS    an ARGV does not meet its rule, or the count of ARGV is not 2
-- ERROR    EMQTYPE    the key holds another type
local base = string.match(KEYS[1] or '', '^(emq:{[0-9A-Za-z_.%-]+}:)meta$')
if #KEYS ~= 1 or not base or #base > 71 then return redis.error_reply('EMQKEYS expected emq:{<q>}:meta') end
if #ARGV ~= 2 then return redis.error_reply('EMQARGS expected 2 ARGV: max_attempts, dead_max') end
local fields = {'max_attempts', 'dead_max'}
for i, name in ipairs(fields) do
  local v = ARGV[i]
  if #v > 15 or not string.match(v, '^[0-9]*$') then
    return redis.error_reply('EMQARGS ' .. name .. ' must be an integer in [0, 999999999999999] or empty')
  end
end
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'hash' then return redis.error_reply('EMQTYPE ' .. KEYS[1] .. ' holds a ' .. kind .. ', not a hash') end
local old = redis.call('HMGET', KEYS[1], unpack(fields))
local reply = {}
for i, name in ipairs(fields) do
  reply[i] = tonumber(old[i]) or 0
  local v = ARGV[i]
  if v ~= '' then
    if tonumber(v) == 0 then
      redis.call('HDEL', KEYS[1], name)
    else
      redis.call('HSET', KEYS[1], name, tonumber(v))
    end
  end
end
return reply
