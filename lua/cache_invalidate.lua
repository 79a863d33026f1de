-- cache_invalidate: delete rows, bump the table's sequence, publish the invalidation.
--
-- One sequence number and one message for the whole call, naming every id in call order.
-- Deleting a row also deletes a fill lease on it, so a fill that began before this call
-- cannot write the value it loaded.
--
-- KEYS[1]  ecc:{<table>}           the coherence record (FORMAT inval), or a shard's
--          ecc:{<table>#<shard>} for a table spread over shards (FORMAT shards)
-- KEYS[2]  emq:{<table>}:inval     the table's invalidation channel (FORMAT inval), or the
--          shard's emq:{<table>#<shard>}:inval, of the same tag as KEYS[1]
-- ARGV[1]  token  token  unique per call: names a new epoch if the record is missing, and
--          becomes the record's last and its ring entry (FORMAT inval)
-- ARGV[2]  id*    id     a starred ARGV repeats: one row id per row, one at least and 1000 at
--          most (an id may repeat). The Go cache sends at most 256 per call
-- DERIVES  ecc:{<table>}:<id>      each row: KEYS[1] .. ":" .. id
-- FORMAT   inval    see cache_set.lua
-- FORMAT   shards   see cache_set.lua
-- REPLY    {epoch, seq}: the record after the bump (a string and an integer)
-- ERROR    ECCKEYS    the KEYS are not one table's (or one shard's) record and channel
-- ERROR    ECCARG     an ARGV does not meet its rule, or no id or more than 1000 are given
-- ERROR    ECCTYPE    the record holds another type than hash, or a seq that is not an integer
local tag = string.match(KEYS[1] or '', '^ecc:{([0-9A-Za-z_.%-]+#?%d*)}$')
local name, shard = string.match(tag or '', '^([^#]*)(.*)$')
if #KEYS ~= 2 or not tag or #name > 64 or shard ~= '' and not (shard == '#0' or string.match(shard, '^#[1-9]%d?%d?$') and tonumber(string.sub(shard, 2)) < 256) or KEYS[2] ~= 'emq:{' .. tag .. '}:inval' then
  return redis.error_reply('ECCKEYS expected ecc:{<table>} and emq:{<table>}:inval of one table, or ecc:{<table>#<shard>} and emq:{<table>#<shard>}:inval of one shard')
end
local token = ARGV[1] or ''
if #token ~= 16 or string.find(token, '[^0-9A-Za-z]') then
  return redis.error_reply('ECCARG token must be 16 bytes of [0-9A-Za-z]')
end
if #ARGV < 2 or #ARGV > 1001 then return redis.error_reply('ECCARG expected 1 to 1000 ids') end
for i = 2, #ARGV do
  local id = ARGV[i]
  if id == '' or #id > 512 or string.find(id, '[%z\1-\31\127]') then
    return redis.error_reply('ECCARG ARGV[' .. i .. '] must be 1 to 512 bytes without control bytes')
  end
end
-- One read of the record answers both its type and its fields: a record of another type
-- fails the HMGET, and only then is TYPE asked, for the error's text.
local rec = redis.pcall('HMGET', KEYS[1], 'epoch', 'last', 'seq')
if rec['err'] then
  return redis.error_reply('ECCTYPE ' .. KEYS[1] .. ' holds a ' .. redis.call('TYPE', KEYS[1])['ok'] .. ', not a hash')
end
-- seq is what HINCRBY bumps after the first write: one it cannot bump refuses the call here.
if rec[3] and not (rec[3] == '0' or #rec[3] <= 18 and string.match(rec[3], '^%-?[1-9][0-9]*$')) then
  return redis.error_reply('ECCTYPE ' .. KEYS[1] .. ' holds a seq that is not an integer')
end
local now = redis.call('TIME')
local us = now[1] .. string.format('%06d', tonumber(now[2]))
local epoch = rec[1]
local prev = string.sub(rec[2] or '', 1, 16)
local made = not epoch
if made then epoch = us .. '.' .. token end
local msg = {epoch, '', us, prev, token}
for i = 2, #ARGV do
  redis.call('DEL', KEYS[1] .. ':' .. ARGV[i])
  msg[i + 4] = ARGV[i]
end
local seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
-- last is this call's token; ring field r<seq mod 64> is "<seq>:<token>" (FORMAT inval)
local sseq = string.format('%d', seq)
if made then
  redis.call('HSET', KEYS[1], 'epoch', epoch, 'last', token, 'r' .. (seq % 64), sseq .. ':' .. token)
else
  redis.call('HSET', KEYS[1], 'last', token, 'r' .. (seq % 64), sseq .. ':' .. token)
end
msg[2] = sseq
redis.call('SPUBLISH', KEYS[2], table.concat(msg, '\n'))
return {epoch, seq}
