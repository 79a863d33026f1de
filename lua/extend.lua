-- extend: renew the leases of one or more claimed jobs of a queue to server TIME + lease_ms.
--
-- Fenced per job (FORMAT fencing): a job is extended only when its row exists, is "active"
-- and holds attempts = its token. A job that fails the check is not written and is named in
-- the reply with its EMQSTALE reason, so a heartbeat covering many jobs learns in one call
-- which leases it lost. The new deadline may be earlier than the old one: it is what the
-- caller asked for. Each job costs one read (HMGET state, attempts); the renewed ones are
-- written in one ZADD per 1000.
--
-- KEYS[1]  emq:{<q>}:active             scored by lease deadline (FORMAT lease)
-- ARGV[1]  lease_ms  uint[1,999999999999999]  new lease length in ms from server TIME. The Go
--          bus passes ExtendOpts.Lease, else Config.Lease (default 30000); its worker's
--          heartbeat passes each kind's HandlerOpts.Lease, else WorkerConfig.Lease
-- ARGV[2]  id*       jobid  a starred ARGV repeats: ARGV[2], [3] describe the first job, [4],
--          [5] the second, and so on (one job at least). id: its JOB id
-- ARGV[3]  token*    fence  the attempts count its claim returned
-- DERIVES  emq:{<q>}:job:<id>           each job's row: KEYS[1] up to its type, "job:", the id
-- FORMAT   jobid    see enqueue.lua
-- FORMAT   servertime  see claim.lua
-- FORMAT   lease    see claim.lua
-- FORMAT   fencing  see complete.lua
-- FORMAT   cancel   see cancel.lua
-- REPLY    {deadline_ms, lost}: deadline_ms is the new lease deadline (server TIME +
--          lease_ms) of every extended job; lost is a flat list {id, reason, id, reason, ...}
--          of the jobs not extended, in call order, reason being "EMQSTALE no row", "EMQSTALE
--          not active", "EMQSTALE token mismatch" or "EMQSTALE cancelled" (the caller holds
--          the job, but it was cancelled: FORMAT cancel); {} when every lease was renewed
-- ERROR    EMQKEYS    KEYS[1] is not a queue's active set
-- ERROR    EMQARGS    an ARGV does not meet its rule, or the count is not 1 + 2n (nothing
--          written)
-- ERROR    EMQTYPE    a key holds another type (nothing written)
local base = string.match(KEYS[1] or '', '^(emq:{[0-9A-Za-z_.%-]+}:)active$')
if #KEYS ~= 1 or not base or #base > 71 then return redis.error_reply('EMQKEYS expected emq:{<q>}:active') end
local lease = ARGV[1] or ''
if #lease > 15 or not string.match(lease, '^[0-9]+$') or tonumber(lease) < 1 then
  return redis.error_reply('EMQARGS lease_ms must be an integer in [1, 999999999999999]')
end
local n = (#ARGV - 1) / 2
if n < 1 or n ~= math.floor(n) then return redis.error_reply('EMQARGS expected lease_ms then id, token per job') end
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'zset' then return redis.error_reply('EMQTYPE ' .. KEYS[1] .. ' holds a ' .. kind .. ', not a zset') end
-- Pass 1: validate every argument and read every row (one HMGET each); no write.
local ok = {}
local lost = {}
for i = 1, n do
  local id, token = ARGV[2 * i], ARGV[2 * i + 1]
  if #id ~= 30 or not string.match(id, '^JOB_[0-7][0-9A-HJKMNP-TV-Z]+$') then
    return redis.error_reply('EMQARGS ARGV[' .. (2 * i) .. '] is not a JOB id')
  end
  if #token > 15 or not string.match(token, '^[1-9][0-9]*$') then
    return redis.error_reply('EMQARGS ARGV[' .. (2 * i + 1) .. '] token must be an integer in [1, 999999999999999]')
  end
  -- HMGET answers two nils for a missing row and an error for a key of another type (caught,
  -- so the script can name it); EXISTS runs only when both fields are missing.
  local jk = base .. 'job:' .. id
  local row = redis.pcall('HMGET', jk, 'state', 'attempts')
  local reason
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
  elseif row[1] == 'cancelling' then
    reason = 'EMQSTALE cancelled' -- FORMAT cancel: the holder stops the job
  end
  if reason then
    lost[#lost + 1] = id
    lost[#lost + 1] = reason
  else
    ok[#ok + 1] = id
  end
end
-- Pass 2: one ZADD of every renewed id per 1000 (unpack's bound).
local t = redis.call('TIME')
local deadline = t[1] * 1000 + math.floor(t[2] / 1000) + tonumber(lease)
local add = {}
for _, id in ipairs(ok) do
  add[#add + 1] = deadline
  add[#add + 1] = id
end
for i = 1, #add, 2000 do
  redis.call('ZADD', KEYS[1], unpack(add, i, math.min(i + 1999, #add)))
end
return {deadline, lost}
