-- cache_stats_read: the live stats snapshots of a table from the caches that declared it, by
-- the server's clock. Writes nothing.
--
-- workers_read's twin for the cache role: a snapshot is live while the server's TIME is at
-- most its exp (FORMAT report). When the hash holds more than limit fields, limit of them are
-- read, picked at random (HRANDFIELD), and the reply's fields count tells the reader so.
--
-- KEYS[1]  ecc:{<table>}#stats       hash: cache id -> snapshot (FORMAT report)
-- ARGV[1]  limit     uint[1,10000]      the most fields to read. The Go cache passes 1000
-- FORMAT   report   see workers_report.lua
-- FORMAT   servertime  see claim.lua
-- REPLY    {now_ms, fields, id, snapshot, id, snapshot, ...}: the server's TIME in ms and how
--          many fields the hash holds, live or not (integers), then each live snapshot read,
--          with its cache's id, in byte order of the ids
-- ERROR    ECCKEYS    KEYS[1] is not a table's stats hash
-- ERROR    ECCARG     limit does not meet its rule, or the count of ARGV is not 1
-- ERROR    ECCTYPE    the key holds another type than hash
local name = string.match(KEYS[1] or '', '^ecc:{([0-9A-Za-z_.%-]+)}#stats$')
if #KEYS ~= 1 or not name or #name > 64 then return redis.error_reply('ECCKEYS expected ecc:{<table>}#stats') end
if #ARGV ~= 1 then return redis.error_reply('ECCARG expected 1 ARGV: limit') end
local limit = ARGV[1]
if #limit > 5 or not string.match(limit, '^[0-9]+$') or tonumber(limit) < 1 or tonumber(limit) > 10000 then
  return redis.error_reply('ECCARG limit must be an integer in [1, 10000]')
end
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'hash' then return redis.error_reply('ECCTYPE ' .. KEYS[1] .. ' holds a ' .. kind .. ', not a hash') end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local n = redis.call('HLEN', KEYS[1])
local flat
if n <= tonumber(limit) then
  flat = redis.call('HGETALL', KEYS[1])
else
  flat = redis.call('HRANDFIELD', KEYS[1], tonumber(limit), 'WITHVALUES')
end
local live = {}
for i = 1, #flat, 2 do
  local exp = tonumber(string.match(flat[i + 1], '^{"at":[0-9]+,"exp":([0-9]+)[,}]'))
  if exp and exp >= now then live[#live + 1] = {flat[i], flat[i + 1]} end
end
table.sort(live, function(a, b) return a[1] < b[1] end)
local out = {now, n}
for _, e in ipairs(live) do
  out[#out + 1] = e[1]
  out[#out + 1] = e[2]
end
return out
