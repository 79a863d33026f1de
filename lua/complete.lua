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
-- DERIVES  emq:{<q>}:result:<id>        the job's result: KEYS[1] up to its type, "result:",
--          the id
-- DERIVES  emq:{<q>}:errors:<id>        the job's failure history: KEYS[1] up to its type,
--          "errors:", the id
-- FORMAT   jobid    see enqueue.lua
-- FORMAT   lease    see claim.lua
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
-- ERROR    EMQTYPE    a key holds another type
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
  redis.call('SET', rk, string.format('%d %d ', tonumber(token), now) .. result, 'PX', ttl)
end
return 1
