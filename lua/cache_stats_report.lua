-- cache_stats_report: publish one cache's stats snapshot of a table for tools, or withdraw
-- it, and prune snapshots that expired.
--
-- workers_report's twin for the cache role. A cache calls it once per report interval for each
-- table it declared (the Go cache: Config.StatsInterval, default 5 s) and once with an empty
-- snapshot when it closes. The snapshot is stamped with the server's TIME; up to prune other
-- fields, picked at random (HRANDFIELD), are read and deleted when expired; the key's TTL is
-- kept at least ttl_ms, so the hash goes once no cache reports. The key is not a row: "#"
-- follows the hash tag, and no row id can make a row key of it.
--
-- KEYS[1]  ecc:{<table>}#stats       hash: cache id -> snapshot (FORMAT report)
-- ARGV[1]  id        id                 the cache's id, its field. The Go cache passes
--          Config.ID (default <host>-<pid>-<8 random hex>)
-- ARGV[2]  snapshot  bytes              a JSON object of at most 65536 bytes that begins with
--          {" and ends with }, without the members at and exp (FORMAT report, FORMAT
--          tablestats); "" withdraws the cache's field
-- ARGV[3]  ttl_ms    uint[1,86400000]   how long the snapshot stays live. The Go cache passes
--          3 report intervals
-- ARGV[4]  prune     uint[0,1000]       how many other fields to check for expiry. The Go
--          cache passes 16
-- FORMAT   report   see workers_report.lua
-- FORMAT   tablestats  the members a cache publishes for one table (Go: cache.Stats),
--          integers unless said otherwise: v (1, this format's version), every_ms (its report
--          interval), then its counters since the table was declared: l1_hits, l2_hits,
--          misses, loads, load_errors, load_ns (the loads' total duration), fills_refused,
--          sets_refused, installs_refused, corrupt_rows, early_refreshes, lease_waits,
--          lease_takeovers, stale_served, degraded_loads, breaker_opens, invalidations_sent,
--          invalidations_received, gaps, regressions, flushes, reconciles, propagation_count,
--          propagation_total_ns, propagation_max_ns; propagation_hist (optional), the
--          propagation delays' histogram: an array of [up_to_ns, count] pairs, one per
--          non-empty bucket, up_to_ns ascending, each counting the delays at most up_to_ns and
--          above the pair before it (the Go cache's buckets: 8 per power of two of ns), which a
--          reader sums bucket by bucket across caches; and its state: degraded (true or
--          false), degraded_since_ms (unix ms by the cache's clock, 0 when not degraded),
--          pending_invalidations (-1 when a whole-table invalidation is owed)
-- FORMAT   servertime  see claim.lua
-- REPLY    {now_ms, pruned}: the server's TIME in ms, which stamped the snapshot, and how
--          many expired fields this call deleted (integers)
-- ERROR    ECCKEYS    KEYS[1] is not a table's stats hash
-- ERROR    ECCARG     an ARGV does not meet its rule (the snapshot is not such an object), or
--          the count of ARGV is not 4
-- ERROR    ECCTYPE    the key holds another type than hash
local name = string.match(KEYS[1] or '', '^ecc:{([0-9A-Za-z_.%-]+)}#stats$')
if #KEYS ~= 1 or not name or #name > 64 then return redis.error_reply('ECCKEYS expected ecc:{<table>}#stats') end
if #ARGV ~= 4 then return redis.error_reply('ECCARG expected 4 ARGV: id, snapshot, ttl_ms, prune') end
local id, snap, ttl, prune = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
if #id < 1 or #id > 512 or string.find(id, '[%z\1-\31\127]') then
  return redis.error_reply('ECCARG id must be 1 to 512 bytes with no control bytes')
end
if snap ~= '' then
  -- cjson takes NaN, Infinity, hex, "+1" and leading zeros by default, none of them JSON: off
  -- for this decode only (the setting is the Lua VM's, so it is put back at once)
  local lax = cjson.decode_invalid_numbers()
  cjson.decode_invalid_numbers(false)
  local ok, obj = pcall(cjson.decode, snap)
  cjson.decode_invalid_numbers(lax)
  if #snap > 65536 or string.sub(snap, 1, 2) ~= '{"' or string.sub(snap, -1) ~= '}' or not ok
    or type(obj) ~= 'table' or obj.at ~= nil or obj.exp ~= nil then
    return redis.error_reply('ECCARG snapshot must be a JSON object of at most 65536 bytes, without at and exp, or ""')
  end
end
if #ttl > 8 or not string.match(ttl, '^[0-9]+$') or tonumber(ttl) < 1 or tonumber(ttl) > 86400000 then
  return redis.error_reply('ECCARG ttl_ms must be an integer in [1, 86400000]')
end
if #prune > 4 or not string.match(prune, '^[0-9]+$') or tonumber(prune) > 1000 then
  return redis.error_reply('ECCARG prune must be an integer in [0, 1000]')
end
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'hash' then return redis.error_reply('ECCTYPE ' .. KEYS[1] .. ' holds a ' .. kind .. ', not a hash') end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local pruned = 0
if tonumber(prune) > 0 and kind == 'hash' then
  local sample = redis.call('HRANDFIELD', KEYS[1], tonumber(prune) + 1, 'WITHVALUES')
  local others = 0 -- the sample may miss the cache's own field: check prune others at most
  for i = 1, #sample, 2 do
    if sample[i] ~= id then others = others + 1 end
    if others > tonumber(prune) then break end
    local exp = tonumber(string.match(sample[i + 1], '^{"at":[0-9]+,"exp":([0-9]+)[,}]'))
    if sample[i] ~= id and (not exp or exp < now) then
      pruned = pruned + redis.call('HDEL', KEYS[1], sample[i])
    end
  end
end
if snap == '' then
  redis.call('HDEL', KEYS[1], id)
  return {now, pruned}
end
redis.call('HSET', KEYS[1], id, '{"at":' .. now .. ',"exp":' .. (now + tonumber(ttl)) .. ',' .. string.sub(snap, 2))
if redis.call('PTTL', KEYS[1]) < tonumber(ttl) then redis.call('PEXPIRE', KEYS[1], tonumber(ttl)) end
return {now, pruned}
