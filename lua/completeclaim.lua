-- completeclaim: retire the jobs a worker finished and claim its next ones in one call, with the
-- effect of completemany on those jobs followed by claim, as one atomic step.
--
-- A worker whose round trip both reports finished jobs and asks for new ones pays one script's
-- fixed costs instead of two. Each finished job is fenced by its own token exactly as in
-- completemany (one HMGET per row; the retired rows go in one ZREM and one DEL per 1000, each
-- failure history that can exist in a DEL of its own, as completemany does; a job cancelled
-- while claimed retires like an active one), and the reply names each refused job and why. The claim is claim.lua's: due scheduled jobs are
-- promoted first, then up to count lex-oldest pending jobs are leased on the server clock,
-- each with its row's attempts + 1 as its token. On a paused queue the finished jobs are still
-- retired and nothing is claimed; the reply says paused. Every argument and every key's type is
-- checked before the first write, so a refused call writes nothing.
--
-- KEYS[1]  emq:{<q>}:pending            score-0 set; lex order is mint order
-- KEYS[2]  emq:{<q>}:active             scored by lease deadline (FORMAT lease)
-- KEYS[3]  emq:{<q>}:schedule           scored by run-at (ms); due ids move to pending first
-- KEYS[4]  emq:{<q>}:meta               hash; field paused = "1": claim nothing
-- ARGV[1]  lease_ms       uint[1,999999999999999]  lease of the claimed jobs, in ms from server
--          TIME. The Go worker passes WorkerConfig.Lease (default the bus's Config.Lease, 30 s)
-- ARGV[2]  count          uint[1,999999999999999]  how many jobs to claim at most
-- ARGV[3]  promote_limit  uint[0,999999999999999]  how many due scheduled jobs to promote
--          before claiming, oldest run-at first; 0 promotes none. The Go worker passes
--          Config.PromoteLimit (default 100)
-- ARGV[4]  id*     jobid  a starred ARGV repeats: ARGV[4], [5] describe the first finished
--          job, [6], [7] the second, and so on (one job at least). id: its JOB id
-- ARGV[5]  token*  fence  the attempts count its claim returned
-- DERIVES  emq:{<q>}:job:<id>           each job's row: KEYS[1] up to its type, "job:", the id
-- DERIVES  emq:{<q>}:joblane            read: exists (FORMAT lanes)
-- DERIVES  emq:{<q>}:flow               read: exists
-- DERIVES  emq:{<q>}:laneready          read: exists
-- DERIVES  emq:{<q>}:errors:<id>        each finished job's failure history: KEYS[1] up to its
--          type, "errors:", the id
-- FORMAT   jobid    see enqueue.lua
-- FORMAT   envelope see enqueue.lua
-- FORMAT   servertime  see claim.lua
-- FORMAT   lease    see claim.lua
-- FORMAT   fencing  see complete.lua
-- FORMAT   lanes    see laneclaim.lua
-- FORMAT   failure  see fail.lua
-- FORMAT   cancel   see cancel.lua
-- REPLY    {retired, refused, paused, claimed}: retired is how many finished jobs were
--          retired; refused is a flat list {pos, reason, ...} of those not retired, in call
--          order, as in completemany's reply (pos counts the finished jobs from 1); paused is
--          1 when the queue is paused (then claimed is {}), else 0; claimed is claim's reply:
--          {id, payload, attempts, ...}, one triple per claimed job, oldest first, attempts
--          being the job's new fencing token
-- ERROR    EMQKEYS    the KEYS are not one queue's pending, active, schedule, meta
-- ERROR    EMQARGS    an ARGV does not meet its rule, or the count is not 3 + 2n (nothing
--          written)
-- ERROR    EMQTYPE    a key holds another type (nothing written)
-- ERROR    EMQLANES   the queue keeps lane state (joblane, flow or laneready exists): nothing is
--          written, not even the retirements; laneclaim retires and claims such a queue
local base = string.match(KEYS[1] or '', '^(emq:{[0-9A-Za-z_.%-]+}:)pending$')
if #KEYS ~= 4 or not base or #base > 71 or KEYS[2] ~= base .. 'active' or KEYS[3] ~= base .. 'schedule' or KEYS[4] ~= base .. 'meta' then
  return redis.error_reply('EMQKEYS expected emq:{<q>}:pending, active, schedule, meta of one queue')
end
local function uint(s, lo)
  if s and #s <= 15 and string.match(s, '^[0-9]+$') and tonumber(s) >= lo then return tonumber(s) end
end
local n = (#ARGV - 3) / 2
if n < 1 or n ~= math.floor(n) then
  return redis.error_reply('EMQARGS expected lease_ms, count, promote_limit, then id, token per finished job')
end
local lease, count, plimit = uint(ARGV[1], 1), uint(ARGV[2], 1), uint(ARGV[3], 0)
if not lease then return redis.error_reply('EMQARGS lease_ms must be an integer in [1, 999999999999999]') end
if not count then return redis.error_reply('EMQARGS count must be an integer in [1, 999999999999999]') end
if not plimit then return redis.error_reply('EMQARGS promote_limit must be an integer in [0, 999999999999999]') end
for i = 1, n do
  local id, token = ARGV[2 * i + 2], ARGV[2 * i + 3]
  if #id ~= 30 or not string.match(id, '^JOB_[0-7][0-9A-HJKMNP-TV-Z]+$') then
    return redis.error_reply('EMQARGS ARGV[' .. (2 * i + 2) .. '] is not a JOB id')
  end
  if #token > 15 or not string.match(token, '^[1-9][0-9]*$') then
    return redis.error_reply('EMQARGS ARGV[' .. (2 * i + 3) .. '] token must be an integer in [1, 999999999999999]')
  end
end
local function typeerr(key, got, want)
  if got ~= 'none' and got ~= want then return 'EMQTYPE ' .. key .. ' holds a ' .. got .. ', not a ' .. want end
end
local e = typeerr(KEYS[1], redis.call('TYPE', KEYS[1])['ok'], 'zset')
  or typeerr(KEYS[2], redis.call('TYPE', KEYS[2])['ok'], 'zset')
if e then return redis.error_reply(e) end
local paused = redis.pcall('HGET', KEYS[4], 'paused')
if type(paused) == 'table' and paused['err'] then
  return redis.error_reply(typeerr(KEYS[4], redis.call('TYPE', KEYS[4])['ok'], 'hash') or paused['err'])
end
paused = paused == '1'
-- lanes: a queue with lane state is retired and claimed by laneclaim (FORMAT lanes).
if redis.call('EXISTS', base .. 'joblane', base .. 'flow', base .. 'laneready') > 0 then
  return redis.error_reply('EMQLANES the queue has lanes, priorities or a rate: retire and claim with laneclaim')
end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local due = {}
if plimit > 0 and not paused then
  due = redis.pcall('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, plimit)
  if due['err'] then
    return redis.error_reply(typeerr(KEYS[3], redis.call('TYPE', KEYS[3])['ok'], 'zset') or due['err'])
  end
else
  e = typeerr(KEYS[3], redis.call('TYPE', KEYS[3])['ok'], 'zset')
  if e then return redis.error_reply(e) end
end
-- The finished jobs: read every row (one HMGET each) before the first write.
local ok, refused, retired, again = {}, {}, {}, {}
for i = 1, n do
  local id, token = ARGV[2 * i + 2], ARGV[2 * i + 3]
  local reason
  if retired[id] then
    reason = 'EMQSTALE no row'
  else
    local jk = base .. 'job:' .. id
    local row = redis.pcall('HMGET', jk, 'state', 'attempts')
    if row['err'] then
      if redis.call('EXISTS', jk) == 1 then
        return redis.error_reply('EMQTYPE ' .. jk .. ' holds a ' .. redis.call('TYPE', jk)['ok'] .. ', not a hash')
      end
      return redis.error_reply(row['err'])
    elseif not row[1] and not row[2] and redis.call('EXISTS', jk) == 0 then
      reason = 'EMQSTALE no row'
    elseif row[1] ~= 'active' and row[1] ~= 'cancelling' then
      reason = 'EMQSTALE not active'
    elseif row[2] ~= token then
      reason = 'EMQSTALE token mismatch'
    end
  end
  if reason then
    refused[#refused + 1] = i
    refused[#refused + 1] = reason
  else
    retired[id] = true
    ok[#ok + 1] = id
    if token ~= '1' then again[#again + 1] = id end
  end
end
-- Retire: one ZREM and one DEL per 1000 jobs (unpack's bound).
local rows = {}
for i, id in ipairs(ok) do
  rows[i] = base .. 'job:' .. id
end
for i = 1, #ok, 1000 do
  redis.call('ZREM', KEYS[2], unpack(ok, i, math.min(i + 999, #ok)))
  redis.call('DEL', unpack(rows, i, math.min(i + 999, #rows)))
end
-- The failure histories (FORMAT failure) exist only for jobs whose token is > 1; see
-- complete.lua for the pcall.
for _, id in ipairs(again) do
  redis.pcall('DEL', base .. 'errors:' .. id)
end
if paused then return {#ok, refused, 1, {}} end
-- Promote, then claim, as claim.lua does.
if #due > 0 then
  local add = {}
  for _, id in ipairs(due) do
    local jk = base .. 'job:' .. id
    if redis.call('TYPE', jk)['ok'] == 'hash' then
      redis.call('HSET', jk, 'state', 'pending')
      add[#add + 1] = 0
      add[#add + 1] = id
    end
  end
  for i = 1, #due, 1000 do
    redis.call('ZREM', KEYS[3], unpack(due, i, math.min(i + 999, #due)))
  end
  for i = 1, #add, 2000 do
    redis.call('ZADD', KEYS[1], unpack(add, i, math.min(i + 1999, #add)))
  end
end
local out, add = {}, {}
local popped = redis.call('ZPOPMIN', KEYS[1], count)
local deadline = now + lease
for i = 1, #popped, 2 do
  local id = popped[i]
  local jk = base .. 'job:' .. id
  local row = redis.pcall('HMGET', jk, 'attempts', 'payload')
  local att
  if not row['err'] and (row[1] or row[2]) then
    if not row[1] then
      att = 1
    elseif string.match(row[1], '^[0-9]+$') and #row[1] <= 15 then
      att = tonumber(row[1]) + 1
    end
  end
  if att then
    redis.call('HSET', jk, 'state', 'active', 'attempts', string.format('%d', att))
    add[#add + 1] = deadline
    add[#add + 1] = id
    out[#out + 1] = id
    out[#out + 1] = row[2]
    out[#out + 1] = att
  end
end
for i = 1, #add, 2000 do
  redis.call('ZADD', KEYS[2], unpack(add, i, math.min(i + 1999, #add)))
end
return {#ok, refused, 0, out}
