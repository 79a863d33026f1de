-- completemany: retire several claimed jobs of a queue in one call, each fenced by its own
-- token exactly as complete does; the jobs that fail their check are named in the reply.
--
-- Pass 1 validates every argument and reads every row (one HMGET each) without writing; pass 2
-- retires the jobs that passed: one ZREM from active and one DEL of their rows per 1000 jobs,
-- then a DEL of its own for each failure history that can exist (token > 1). The result is the
-- same as calling complete once per job in call order: a job named twice is retired by its
-- first passing entry, and a later entry for it answers EMQSTALE no row.
--
-- KEYS[1]  emq:{<q>}:active             scored by lease deadline (FORMAT lease)
-- ARGV[1]  id*     jobid  a starred ARGV repeats: ARGV[1], [2] describe the first job, [3],
--          [4] the second, and so on (one job at least). id: its JOB id
-- ARGV[2]  token*  fence  the attempts count its claim returned
-- DERIVES  emq:{<q>}:job:<id>           each job's row: KEYS[1] up to its type, "job:", the id
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
-- DERIVES  emq:{<q>}:errors:<id>        each job's failure history: KEYS[1] up to its type,
--          "errors:", the id
-- FORMAT   jobid    see enqueue.lua
-- FORMAT   lease    see claim.lua
-- FORMAT   fencing  see complete.lua
-- FORMAT   lanes    see laneclaim.lua
-- FORMAT   joblane  see laneclaim.lua
-- FORMAT   wake     see enqueue.lua
-- FORMAT   failure  see fail.lua
-- FORMAT   cancel   see cancel.lua
-- REPLY    {retired, refused}: retired is how many jobs were retired; refused is a flat list
--          {pos, reason, pos, reason, ...} of the jobs not retired, in call order: pos is the
--          job's 1-based position in the call (an id may appear twice), reason is
--          "EMQSTALE no row", "EMQSTALE not active" or "EMQSTALE token mismatch"; {} when
--          every job was retired
-- ERROR    EMQKEYS    KEYS[1] is not a queue's active set
-- ERROR    EMQARGS    an ARGV does not meet its rule, or the count is not 2n (nothing written)
-- ERROR    EMQTYPE    a key holds another type, a lane key included, or flow's waiting or vt is not a number (nothing written)
local base = string.match(KEYS[1] or '', '^(emq:{[0-9A-Za-z_.%-]+}:)active$')
if #KEYS ~= 1 or not base or #base > 71 then return redis.error_reply('EMQKEYS expected emq:{<q>}:active') end
local n = #ARGV / 2
if n < 1 or n ~= math.floor(n) then return redis.error_reply('EMQARGS expected id, token per job') end
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'zset' then return redis.error_reply('EMQTYPE ' .. KEYS[1] .. ' holds a ' .. kind .. ', not a zset') end
-- Pass 1: validate every argument and read every row; no write.
local ok, refused, retired, again = {}, {}, {}, {}
for i = 1, n do
  local id, token = ARGV[2 * i - 1], ARGV[2 * i]
  if #id ~= 30 or not string.match(id, '^JOB_[0-7][0-9A-HJKMNP-TV-Z]+$') then
    return redis.error_reply('EMQARGS ARGV[' .. (2 * i - 1) .. '] is not a JOB id')
  end
  if #token > 15 or not string.match(token, '^[1-9][0-9]*$') then
    return redis.error_reply('EMQARGS ARGV[' .. (2 * i) .. '] token must be an integer in [1, 999999999999999]')
  end
  local reason
  if retired[id] then
    reason = 'EMQSTALE no row'
  else
    -- One read per job: HMGET answers two nils for a missing row and an error for a key of
    -- another type (caught, so the script can name it).
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
if lanes then
  for i = 1, #ok, 1000 do
    local part = {unpack(ok, i, math.min(i + 999, #ok))}
    local vals = redis.call('HMGET', base .. 'joblane', unpack(part))
    for j = 1, #part do lanevals[part[j]] = vals[j] or nil end
  end
end
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
  -- 1000 lanes a round (unpack's bound), so any number of freed lanes is accounted.
  local woke = false
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
  for from = 1, #names, 1000 do
    local part = {unpack(names, from, math.min(from + 999, #names))}
    local act = redis.call('HMGET', base .. 'laneactive', unpack(part))
    local set, del = {}, {}
    for i, lane in ipairs(part) do
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
    local inready = redis.call('ZMSCORE', base .. 'laneready', unpack(part))
    local inwait = redis.call('ZMSCORE', base .. 'lanewait', unpack(part))
    local back = {}
    for i, lane in ipairs(part) do
      if not inready[i] and not inwait[i] then
        local n = redis.pcall('ZCARD', base .. 'lanepending:' .. lane)
        if type(n) == 'number' and n > 0 then
          back[#back + 1] = tonumber(redis.call('HGET', base .. 'flow', 'vt')) or 0
          back[#back + 1] = lane
        elseif urgentWaits() then
          woke = true
        end
      end
    end
    if #back > 0 then
      redis.call('ZADD', base .. 'laneready', unpack(back))
      woke = true
    end
  end
  if woke and redis.call('HGET', base .. 'meta', 'paused') ~= '1' then
    redis.call('LPUSH', base .. 'wake', '1')
    redis.call('LTRIM', base .. 'wake', 0, 15)
  end
end
-- Pass 2: retire: one ZREM and one DEL per 1000 jobs (unpack's bound).
local rows = {}
for i, id in ipairs(ok) do
  rows[i] = base .. 'job:' .. id
end
for i = 1, #ok, 1000 do
  redis.call('ZREM', KEYS[1], unpack(ok, i, math.min(i + 999, #ok)))
  redis.call('DEL', unpack(rows, i, math.min(i + 999, #rows)))
end
-- The failure histories (FORMAT failure) exist only for jobs whose token is > 1; see
-- complete.lua for the pcall.
for _, id in ipairs(again) do
  redis.pcall('DEL', base .. 'errors:' .. id)
end
-- lanes: the retired jobs' joblane fields go with their rows, and their lanes free slots.
if lanes then
  local gone = {}
  for _, id in ipairs(ok) do
    if lanevals[id] then
      gone[#gone + 1] = id
      leaves(id)
    end
  end
  for i = 1, #gone, 1000 do
    redis.call('HDEL', base .. 'joblane', unpack(gone, i, math.min(i + 999, #gone)))
  end
  free()
end
return {#ok, refused}
