-- purge: delete dead jobs for good: their rows and failure histories (FORMAT failure) are
-- deleted and their ids leave dead. With ids,
-- exactly those jobs, all or nothing; without, the oldest dead jobs (lex order is mint
-- order), at most limit of them.
--
-- KEYS[1]  emq:{<q>}:dead               score-0 set
-- ARGV[1]  limit  uint[0,999999999999999]  without ids: how many jobs to delete at most, > 0;
--          with ids: ignored (give 0). The Go bus passes PurgeOpts.Limit, else 100
-- ARGV[2]  id*    jobid  optional; a starred ARGV repeats: one JOB id per job, each a dead job
--          of the queue, no id twice
-- DERIVES  emq:{<q>}:job:<id>           each job's row: KEYS[1] up to its type, "job:", the id
-- DERIVES  emq:{<q>}:joblane            the jobs' lanes (FORMAT joblane): their fields go with
--          the rows; read once per call by TYPE, so a queue without lanes pays one command
-- DERIVES  emq:{<q>}:errors:<id>        each job's failure history: KEYS[1] up to its type,
--          "errors:", the id
-- FORMAT   jobid    see enqueue.lua
-- FORMAT   joblane  see laneclaim.lua
-- FORMAT   failure  see fail.lua
-- REPLY    {id, ...}: the JOB ids deleted; {} when dead was empty
-- ERROR    EMQNOJOB   <id>: a named job has no row
-- ERROR    EMQSTATE   <state> <id>: a named job is not dead (nothing written)
-- ERROR    EMQKEYS    KEYS[1] is not a queue's dead set
-- ERROR    EMQARGS    an ARGV does not meet its rule, an id repeats, or limit is 0 without ids
-- ERROR    EMQTYPE    a key holds another type
local base = string.match(KEYS[1] or '', '^(emq:{[0-9A-Za-z_.%-]+}:)dead$')
if #KEYS ~= 1 or not base or #base > 71 then return redis.error_reply('EMQKEYS expected emq:{<q>}:dead') end
if #ARGV < 1 then return redis.error_reply('EMQARGS expected limit, then the ids if any') end
local limit = ARGV[1]
if #limit > 15 or not string.match(limit, '^[0-9]+$') then
  return redis.error_reply('EMQARGS limit must be an integer in [0, 999999999999999]')
end
limit = tonumber(limit)
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'zset' then return redis.error_reply('EMQTYPE ' .. KEYS[1] .. ' holds a ' .. kind .. ', not a zset') end
local ids = {}
if #ARGV > 1 then
  local seen = {}
  for i = 2, #ARGV do
    local id = ARGV[i]
    if #id ~= 30 or not string.match(id, '^JOB_[0-7][0-9A-HJKMNP-TV-Z]+$') then
      return redis.error_reply('EMQARGS ARGV[' .. i .. '] is not a JOB id')
    end
    if seen[id] then return redis.error_reply('EMQARGS ARGV[' .. i .. '] repeats id ' .. id) end
    seen[id] = true
    local jk = base .. 'job:' .. id
    kind = redis.call('TYPE', jk)['ok']
    if kind == 'none' then return redis.error_reply('EMQNOJOB ' .. id) end
    if kind ~= 'hash' then return redis.error_reply('EMQTYPE ' .. jk .. ' holds a ' .. kind .. ', not a hash') end
    local state = redis.call('HGET', jk, 'state')
    if state ~= 'dead' then return redis.error_reply('EMQSTATE ' .. tostring(state) .. ' ' .. id) end
    ids[#ids + 1] = id
  end
else
  if limit < 1 then return redis.error_reply('EMQARGS limit must be an integer > 0 when no id is given') end
  ids = redis.call('ZRANGE', KEYS[1], 0, limit - 1)
end
local jl = redis.call('TYPE', base .. 'joblane')['ok']
if jl ~= 'none' and jl ~= 'hash' then return redis.error_reply('EMQTYPE ' .. base .. 'joblane holds a ' .. jl .. ', not a hash') end
for _, id in ipairs(ids) do
  local jk = base .. 'job:' .. id
  redis.call('ZREM', KEYS[1], id)
  redis.call('DEL', jk)
  -- A dead job was claimed, so it may have a failure history (FORMAT failure); see
  -- complete.lua for the pcall.
  redis.pcall('DEL', base .. 'errors:' .. id)
end
-- lanes: the purged jobs' joblane fields go with their rows (FORMAT lanes, see laneclaim.lua).
if jl == 'hash' then
  for i = 1, #ids, 1000 do
    redis.call('HDEL', base .. 'joblane', unpack(ids, i, math.min(i + 999, #ids)))
  end
end
return ids
