-- complete: retire a claimed job. Nothing of it remains: its row and its failure history
-- (FORMAT failure) are deleted and its id leaves the active set. Only when the call asks for
-- it (result_ttl_ms > 0) is the job's result kept, for that long (FORMAT result).
--
-- Fenced (FORMAT fencing), so a zombie holding an old token cannot retire the job of the
-- current lease holder. A lease that ran out but was not yet reaped still completes.
--
-- KEYS[1]  emq:{<q>}:active             scored by lease deadline (FORMAT lease)
-- ARGV[1]  id     jobid                    the job's JOB id
-- ARGV[2]  token  fence                    the attempts count the claim returned
-- ARGV[3]  result_ttl_ms  uint[0,999999999999999]  how long to keep the result, in ms; 0
--          keeps none. The Go bus passes CompleteOpts.ResultTTL; its worker the kind's
--          HandlerOpts.ResultTTL when the handler set a result, else 0
-- ARGV[4]  result         bytes[0,65536]  the result; must be "" when result_ttl_ms is 0
-- DERIVES  emq:{<q>}:job:<id>           the job's row: KEYS[1] up to its type, "job:", the id
-- DERIVES  emq:{<q>}:joblane            the lane of each job (FORMAT joblane); read once per
--          call by TYPE, so a queue without lanes pays one command
-- DERIVES  emq:{<q>}:laneactive         a freed lane's count of claimed jobs (FORMAT lanes)
-- DERIVES  emq:{<q>}:laneready          where a lane its cap had stopped comes back
-- DERIVES  emq:{<q>}:lanewait           read: whether a lane is held back
-- DERIVES  emq:{<q>}:lanepending:<lane> read: whether a freed lane has waiting jobs
-- DERIVES  emq:{<q>}:flow               read: the virtual clock vt
-- DERIVES  emq:{<q>}:urgent             checked: its type; read: whether jobs of a priority
--          wait, when a freed lane has none of priority 0 (a wake marker then)
-- DERIVES  emq:{<q>}:meta               read: paused, before a wake marker
-- DERIVES  emq:{<q>}:wake               a wake marker when a lane gets a slot back (FORMAT wake)
-- DERIVES  emq:{<q>}:result:<id>        the job's result: KEYS[1] up to its type, "result:",
--          the id
-- DERIVES  emq:{<q>}:errors:<id>        the job's failure history: KEYS[1] up to its type,
--          "errors:", the id
-- FORMAT   jobid    see enqueue.lua
-- FORMAT   lease    see claim.lua
-- FORMAT   lanes    see laneclaim.lua
-- FORMAT   joblane  see laneclaim.lua
-- FORMAT   wake     see enqueue.lua
-- FORMAT   servertime  see claim.lua
-- FORMAT   failure  see fail.lua
-- FORMAT   cancel   see cancel.lua
-- FORMAT   result   a retired job's result emq:{<q>}:result:<JOB id> is a string: the
--          attempts of the completing claim (its token, decimal), one space, the server TIME
--          of the completion in ms (decimal, FORMAT servertime), one space, then the result
--          (any bytes, at most 65536). complete writes it with SET ... PX result_ttl_ms when
--          the call asks for it, and only then; nothing else writes or deletes it, so it
--          expires with its TTL. lookup of a job without a row reads it
-- FORMAT   fencing  attempts is the fencing token: a claim increments the row's attempts and
--          returns it, and attempts never goes down. Every verb on a claimed job (complete,
--          completemany, completeclaim, fail, extend, snooze) checks inside the script,
--          before any write, that the job's row exists (else "EMQSTALE no row"), that its
--          state is "active" (else "EMQSTALE not active") and that its attempts equals the
--          caller's token, compared as decimal strings (else "EMQSTALE token mismatch"); a
--          refused verb writes nothing. A job cancelled while claimed (its state
--          "cancelling", FORMAT cancel) passes the state check of complete, completemany,
--          completeclaim and fail; extend refuses it, its token matching, with
--          "EMQSTALE cancelled".
-- REPLY    1 (integer): the job was retired
-- ERROR    EMQSTALE   no row | not active | token mismatch (FORMAT fencing; nothing written)
-- ERROR    EMQKEYS    KEYS[1] is not a queue's active set
-- ERROR    EMQARGS    an ARGV does not meet its rule, a result comes without result_ttl_ms, or
--          the count of ARGV is not 4
-- ERROR    EMQTYPE    a key holds another type (a lane key included) or flow's waiting or vt is not a number: nothing written
local base = string.match(KEYS[1] or '', '^(emq:{[0-9A-Za-z_.%-]+}:)active$')
if #KEYS ~= 1 or not base or #base > 71 then return redis.error_reply('EMQKEYS expected emq:{<q>}:active') end
if #ARGV ~= 4 then return redis.error_reply('EMQARGS expected 4 ARGV: id, token, result_ttl_ms, result') end
local id, token = ARGV[1], ARGV[2]
if #id ~= 30 or not string.match(id, '^JOB_[0-7][0-9A-HJKMNP-TV-Z]+$') then
  return redis.error_reply('EMQARGS ARGV[1] is not a JOB id')
end
if #token > 15 or not string.match(token, '^[1-9][0-9]*$') then
  return redis.error_reply('EMQARGS ARGV[2] token must be an integer in [1, 999999999999999]')
end
local ttl, result = ARGV[3], ARGV[4]
if #ttl > 15 or not string.match(ttl, '^[0-9]+$') then
  return redis.error_reply('EMQARGS result_ttl_ms must be an integer in [0, 999999999999999]')
end
if #result > 65536 then return redis.error_reply('EMQARGS result must be at most 65536 bytes') end
local keep = tonumber(ttl) > 0
if not keep and result ~= '' then return redis.error_reply('EMQARGS a result needs result_ttl_ms > 0') end
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'zset' then return redis.error_reply('EMQTYPE ' .. KEYS[1] .. ' holds a ' .. kind .. ', not a zset') end
local jk = base .. 'job:' .. id
-- One read: HMGET answers two nils for a missing row and an error for a key of another type.
local row = redis.pcall('HMGET', jk, 'state', 'attempts')
if row['err'] then
  if redis.call('EXISTS', jk) == 1 then
    return redis.error_reply('EMQTYPE ' .. jk .. ' holds a ' .. redis.call('TYPE', jk)['ok'] .. ', not a hash')
  end
  return redis.error_reply(row['err'])
end
if not row[1] and not row[2] and redis.call('EXISTS', jk) == 0 then return redis.error_reply('EMQSTALE no row') end
if row[1] ~= 'active' and row[1] ~= 'cancelling' then return redis.error_reply('EMQSTALE not active') end
if row[2] ~= token then return redis.error_reply('EMQSTALE token mismatch') end
local rk = base .. 'result:' .. id
if keep then
  kind = redis.call('TYPE', rk)['ok']
  if kind ~= 'none' and kind ~= 'string' then return redis.error_reply('EMQTYPE ' .. rk .. ' holds a ' .. kind .. ', not a string') end
end
-- lanes: one TYPE per call; with lanes, every lane key the call may write is checked first
-- (FORMAT lanes, see laneclaim.lua).
local jl = redis.call('TYPE', base .. 'joblane')['ok']
if jl ~= 'none' and jl ~= 'hash' then return redis.error_reply('EMQTYPE ' .. base .. 'joblane holds a ' .. jl .. ', not a hash') end
local lanes = jl == 'hash'
if lanes then
  for _, k in ipairs({{'laneactive', 'hash'}, {'laneready', 'zset'}, {'lanewait', 'zset'}, {'flow', 'hash'}, {'urgent', 'zset'}, {'meta', 'hash'}, {'wake', 'list'}}) do
    local got = redis.call('TYPE', base .. k[1])['ok']
    if got ~= 'none' and got ~= k[2] then return redis.error_reply('EMQTYPE ' .. base .. k[1] .. ' holds a ' .. got .. ', not a ' .. k[2]) end
  end
  -- flow's waiting (which HINCRBY moves) and vt (a ZADD score): values the calls after the
  -- first write could not take refuse the call here (FORMAT lanes).
  local fv = redis.call('HMGET', base .. 'flow', 'waiting', 'vt')
  local vt = fv[2] and tonumber(fv[2])
  if fv[1] and not (#fv[1] <= 18 and string.match(fv[1], '^%-?[0-9]+$')) or fv[2] and (not vt or vt ~= vt) then
    return redis.error_reply('EMQTYPE ' .. base .. 'flow holds a waiting that is not an integer or a vt that is not a number')
  end
end
local lanevals = {}
if lanes then lanevals[id] = redis.call('HGET', base .. 'joblane', id) or nil end
-- lanes: the lane bookkeeping of jobs leaving active or waiting again (FORMAT lanes).
local freed = {}
local function leaves(id)
  local lane = string.match(lanevals[id] or '', '^[0-3]:[0-9]+:(.+)$')
  if lane then freed[lane] = (freed[lane] or 0) + 1 end
end
local function tolane(id)
  local p, lane = string.match(lanevals[id] or '', '^([0-3]):[0-9]+:(.*)$')
  if not p or (p == '0' and lane == '') then return false end
  if p ~= '0' then
    redis.call('ZADD', base .. 'urgent', -tonumber(p), id)
    return true
  end
  redis.call('ZADD', base .. 'lanepending:' .. lane, 0, id)
  redis.call('HINCRBY', base .. 'flow', 'waiting', 1)
  if not redis.call('ZSCORE', base .. 'lanewait', lane) then
    redis.call('ZADD', base .. 'laneready', 'NX', tonumber(redis.call('HGET', base .. 'flow', 'vt')) or 0, lane)
  end
  return true
end
local function free()
  local names = {}
  for lane in pairs(freed) do names[#names + 1] = lane end
  if #names == 0 then return end
  local act = redis.call('HMGET', base .. 'laneactive', unpack(names))
  local set, del = {}, {}
  for i, lane in ipairs(names) do
    local n = (tonumber(act[i]) or 0) - freed[lane]
    if n > 0 then
      set[#set + 1] = lane
      set[#set + 1] = n
    else
      del[#del + 1] = lane
    end
  end
  if #set > 0 then redis.call('HSET', base .. 'laneactive', unpack(set)) end
  if #del > 0 then redis.call('HDEL', base .. 'laneactive', unpack(del)) end
  -- A lane its cap had stopped has a slot again: back to laneready, and wake a worker.
  local inready = redis.call('ZMSCORE', base .. 'laneready', unpack(names))
  local inwait = redis.call('ZMSCORE', base .. 'lanewait', unpack(names))
  -- A lane whose waiting jobs are all urgent (priority 1 to 3) is not in laneready: its slot
  -- wakes a worker when urgent holds jobs (pcall: a key of another type reads as none).
  local urgent
  local function urgentWaits()
    if urgent == nil then
      local u = redis.pcall('ZCARD', base .. 'urgent')
      urgent = type(u) == 'number' and u > 0
    end
    return urgent
  end
  local back, wake = {}, false
  for i, lane in ipairs(names) do
    if not inready[i] and not inwait[i] then
      local n = redis.pcall('ZCARD', base .. 'lanepending:' .. lane)
      if type(n) == 'number' and n > 0 then
        back[#back + 1] = tonumber(redis.call('HGET', base .. 'flow', 'vt')) or 0
        back[#back + 1] = lane
      elseif urgentWaits() then
        wake = true
      end
    end
  end
  if #back > 0 then redis.call('ZADD', base .. 'laneready', unpack(back)) end
  if (#back > 0 or wake) and redis.call('HGET', base .. 'meta', 'paused') ~= '1' then
    redis.call('LPUSH', base .. 'wake', '1')
    redis.call('LTRIM', base .. 'wake', 0, 15)
  end
end
redis.call('ZREM', KEYS[1], id)
redis.call('DEL', jk)
-- The failure history (FORMAT failure) exists only if an attempt before this one failed
-- (token > 1). pcall: on a node whose slot is being migrated, a key it does not hold refuses
-- the command, and there is then nothing here to delete.
if token ~= '1' then redis.pcall('DEL', base .. 'errors:' .. id) end
-- The result, when asked for (FORMAT result).
if keep then
  local t = redis.call('TIME')
  local now = t[1] * 1000 + math.floor(t[2] / 1000)
  redis.call('SET', rk, string.format('%d %d ', tonumber(token), now) .. result, 'PX', tonumber(ttl))
end
-- lanes: the job's joblane field goes with the row, and its lane frees a slot.
if lanevals[id] then
  redis.call('HDEL', base .. 'joblane', id)
  leaves(id)
  free()
end
return 1
