-- lookup: read one job in one atomic snapshot: its row, the set that holds it and its failure
-- history; or, for a job without a row that was retired with a result, the result. Writes
-- nothing.
--
-- KEYS[1]  emq:{<q>}:pending            score-0 set
-- KEYS[2]  emq:{<q>}:active             scored by lease deadline (FORMAT lease)
-- KEYS[3]  emq:{<q>}:schedule           scored by run-at (ms, server clock)
-- KEYS[4]  emq:{<q>}:dead               score-0 set
-- ARGV[1]  id  jobid                    the job's JOB id
-- DERIVES  emq:{<q>}:job:<id>           the job's row: KEYS[1] up to its type, "job:", the id
-- DERIVES  emq:{<q>}:errors:<id>        the job's failure history: KEYS[1] up to its type,
--          "errors:", the id
-- DERIVES  emq:{<q>}:result:<id>        the job's result: KEYS[1] up to its type, "result:",
--          the id
-- DERIVES  emq:{<q>}:joblane            read: the job's priority, refunds and lane (FORMAT joblane)
-- DERIVES  emq:{<q>}:lanepending:<lane> read: whether the job waits in its lane's set
-- DERIVES  emq:{<q>}:urgent             read: whether the job waits in urgent
-- FORMAT   jobid    see enqueue.lua
-- FORMAT   envelope see enqueue.lua
-- FORMAT   lease    see claim.lua
-- FORMAT   failure  see fail.lua
-- FORMAT   result   see complete.lua
-- FORMAT   lanes    see laneclaim.lua
-- FORMAT   joblane  see laneclaim.lua
-- REPLY    {state, attempts, payload, set, score, failures, result, lane, priority, refunds}:
--          the row's three fields (strings); the set holding the id ("pending", "active",
--          "schedule", "dead", "lanepending" (its lane's), "urgent", or "" when none does) and
--          its score there as an integer (lease deadline or run-at in ms; minus the priority in
--          urgent; 0 in pending, lanepending, dead or none); failures is the failure history,
--          its last 10 entries oldest first (FORMAT failure), {} when the job never failed;
--          result is ""; the job's lane ("" for none), priority and refunds (integers; FORMAT
--          joblane). A job without a row whose result is kept answers {"retired", attempts, "",
--          "", at_ms, {}, result, "", 0, 0}, from its result (FORMAT result)
-- ERROR    EMQNOJOB   <id>: the job has no row (and no result)
-- ERROR    EMQKEYS    the KEYS are not one queue's pending, active, schedule, dead
-- ERROR    EMQARGS    id is not a JOB id, or the count of ARGV is not 1
-- ERROR    EMQTYPE    a key holds another type
local base = string.match(KEYS[1] or '', '^(emq:{[0-9A-Za-z_.%-]+}:)pending$')
if #KEYS ~= 4 or not base or #base > 71 or KEYS[2] ~= base .. 'active' or KEYS[3] ~= base .. 'schedule' or KEYS[4] ~= base .. 'dead' then
  return redis.error_reply('EMQKEYS expected emq:{<q>}:pending, active, schedule, dead of one queue')
end
if #ARGV ~= 1 then return redis.error_reply('EMQARGS expected 1 ARGV: id') end
local id = ARGV[1]
if #id ~= 30 or not string.match(id, '^JOB_[0-7][0-9A-HJKMNP-TV-Z]+$') then
  return redis.error_reply('EMQARGS ARGV[1] is not a JOB id')
end
local function typeerr(key, got, want)
  if got ~= 'none' and got ~= want then return 'EMQTYPE ' .. key .. ' holds a ' .. got .. ', not a ' .. want end
end
local jk = base .. 'job:' .. id
local ek = base .. 'errors:' .. id
local rk = base .. 'result:' .. id
local e = typeerr(KEYS[1], redis.call('TYPE', KEYS[1])['ok'], 'zset')
  or typeerr(KEYS[2], redis.call('TYPE', KEYS[2])['ok'], 'zset')
  or typeerr(KEYS[3], redis.call('TYPE', KEYS[3])['ok'], 'zset')
  or typeerr(KEYS[4], redis.call('TYPE', KEYS[4])['ok'], 'zset')
  or typeerr(jk, redis.call('TYPE', jk)['ok'], 'hash')
  or typeerr(ek, redis.call('TYPE', ek)['ok'], 'list')
  or typeerr(rk, redis.call('TYPE', rk)['ok'], 'string')
if e then return redis.error_reply(e) end
local jl = redis.call('TYPE', base .. 'joblane')['ok']
if jl ~= 'none' and jl ~= 'hash' then return redis.error_reply('EMQTYPE ' .. base .. 'joblane holds a ' .. jl .. ', not a hash') end
local row = redis.call('HMGET', jk, 'state', 'attempts', 'payload')
if not row[1] and not row[2] and not row[3] then
  -- Retired: its result, if the completion kept one (FORMAT result).
  local v = redis.call('GET', rk)
  local att, at = string.match(v or '', '^([0-9]+) ([0-9]+) ')
  if not att then return redis.error_reply('EMQNOJOB ' .. id) end
  return {'retired', att, '', '', tonumber(at), {}, string.sub(v, #att + #at + 3), '', 0, 0}
end
-- lanes: the job's lane and priority, and whether it waits in its lane's set or in urgent.
local prio, refunds, lane = 0, 0, ''
if jl == 'hash' then
  local p, r, l = string.match(redis.call('HGET', base .. 'joblane', id) or '', '^([0-3]):([0-9]+):(.*)$')
  if p then prio, refunds, lane = tonumber(p), tonumber(r), l end
end
local set, score = '', 0
local scores = {
  redis.call('ZSCORE', KEYS[1], id),
  redis.call('ZSCORE', KEYS[2], id),
  redis.call('ZSCORE', KEYS[3], id),
  redis.call('ZSCORE', KEYS[4], id),
}
local names = {'pending', 'active', 'schedule', 'dead'}
for i = 1, 4 do
  if scores[i] then
    set, score = names[i], tonumber(scores[i])
    break
  end
end
if set == '' and prio > 0 and redis.call('ZSCORE', base .. 'urgent', id) then
  set, score = 'urgent', -prio
elseif set == '' and lane ~= '' and type(redis.pcall('ZSCORE', base .. 'lanepending:' .. lane, id)) == 'string' then
  set = 'lanepending'
end
return {row[1], row[2], row[3], set, score, redis.call('LRANGE', ek, -10, -1), '', lane, prio, refunds}
