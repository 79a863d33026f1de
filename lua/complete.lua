-- complete: retire a claimed job. Nothing of it remains: its row is deleted and its id leaves
-- the active set.
--
-- Fenced: the row must exist, have state "active" and attempts equal to the caller's token
-- (the attempts count its claim minted). Otherwise the script writes nothing and replies
-- EMQSTALE with the reason, so a zombie holding an old token cannot retire the job of the
-- current lease holder. A lease that ran out but was not yet reaped still completes.
--
-- KEYS[1]  emq:{<q>}:active             scored by lease deadline (ms, server clock)
-- ARGV[1]  id                           the job's JOB id
-- ARGV[2]  token                        the attempts count the claim returned, an integer > 0
-- DERIVES  emq:{<q>}:job:<id>           the job's row: KEYS[1] up to its type, "job:", the id
-- REPLY    1 (integer): the job was retired
-- ERRORS   EMQSTALE no row | EMQSTALE not active | EMQSTALE token mismatch (nothing written);
--          EMQKEYS when KEYS[1] is not a queue's active set; EMQARGS when an ARGV is not as
--          declared; EMQTYPE when a key holds another type
local base = string.match(KEYS[1], '^(emq:{[%w_.%-]+}:)active$')
if not base or #base > 71 then return redis.error_reply('EMQKEYS expected emq:{<q>}:active') end
local id, token = ARGV[1], ARGV[2]
if #id ~= 30 or not string.match(id, '^JOB_[0-7][0-9A-HJKMNP-TV-Z]+$') then
  return redis.error_reply('EMQARGS ARGV[1] is not a JOB id')
end
if #token > 15 or not string.match(token, '^[1-9]%d*$') then
  return redis.error_reply('EMQARGS ARGV[2] token must be an integer > 0')
end
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'zset' then return redis.error_reply('EMQTYPE ' .. KEYS[1] .. ' holds a ' .. kind .. ', not a zset') end
local jk = base .. 'job:' .. id
kind = redis.call('TYPE', jk)['ok']
if kind == 'none' then return redis.error_reply('EMQSTALE no row') end
if kind ~= 'hash' then return redis.error_reply('EMQTYPE ' .. jk .. ' holds a ' .. kind .. ', not a hash') end
local row = redis.call('HMGET', jk, 'state', 'attempts')
if row[1] ~= 'active' then return redis.error_reply('EMQSTALE not active') end
if row[2] ~= token then return redis.error_reply('EMQSTALE token mismatch') end
redis.call('ZREM', KEYS[1], id)
redis.call('DEL', jk)
return 1
