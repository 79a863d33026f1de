-- workers_report: publish one worker's stats snapshot for tools, or withdraw it, and prune
-- snapshots that expired.
--
-- A worker calls it once per report interval (the Go worker: WorkerConfig.StatsInterval,
-- default 5 s) and once with an empty snapshot when it stops. The script stamps the snapshot
-- with the server's TIME, so a reader (workers_read) tells live workers from dead ones by the
-- server's clock alone. It also reads up to prune other fields, picked at random
-- (HRANDFIELD), and deletes those that expired: every live worker sweeps a little, so a dead
-- worker's field goes soon after it expires and the hash holds about one field per live
-- worker. The key's TTL is kept at least ttl_ms, so the hash goes once no worker reports.
--
-- KEYS[1]  emq:{<q>}:workers         hash: worker id -> snapshot (FORMAT report)
-- ARGV[1]  id        id                 the worker's id, its field. The Go worker passes
--          WorkerConfig.ID (default <host>-<pid>-<8 random hex>)
-- ARGV[2]  snapshot  bytes              a JSON object of at most 65536 bytes that begins with
--          {" and ends with }, without the members at and exp (FORMAT report, FORMAT
--          workerstats); "" withdraws the worker's field
-- ARGV[3]  ttl_ms    uint[1,86400000]   how long the snapshot stays live. The Go worker passes
--          3 report intervals
-- ARGV[4]  prune     uint[0,1000]       how many other fields to check for expiry. The Go
--          worker passes 16
-- FORMAT   report   a published snapshot is a JSON object whose first members are at (the
--          server's TIME in ms when it was published) and exp (at + the publisher's ttl_ms),
--          then the publisher's own members: {"at":1712345678901,"exp":1712345693901,...}.
--          The snapshot is live while the server's TIME is at most exp. The publisher sends
--          the object without at and exp; the script writes them. A field whose value does
--          not begin so is pruned like an expired one
-- FORMAT   workerstats  the members a worker publishes (Go: bus.WorkerStats), integers
--          unless said otherwise: v (1, this format's version), every_ms (its report
--          interval), started_ms (unix ms by the worker's clock when it started), concurrency,
--          kinds (an array of the kinds it handles), and the counters since it started:
--          running (handlers running now), claimed, completed, failed, retried, dead,
--          snoozed, handed_back, stale, lease_lost, cancelled (jobs a heartbeat found
--          cancelled while claimed), rate_limited (jobs handed back by a handler's
--          RateLimited: see ratelimited.lua), round_trips and round_trip_us (the pipelines
--          sent and their time in flight, summed, in µs), and prefetch (the size of its
--          prefetch buffer now; absent from a worker of an older version). A reader sums them
--          over the live workers; a rate is the difference of two reads of one worker id over
--          the difference of their at; a worker that stops or dies drops out of the sum. A
--          reader treats a missing member as 0
-- FORMAT   servertime  see claim.lua
-- REPLY    {now_ms, pruned}: the server's TIME in ms, which stamped the snapshot, and how
--          many expired fields this call deleted (integers)
-- ERROR    EMQKEYS    KEYS[1] is not a queue's workers hash
-- ERROR    EMQARGS    an ARGV does not meet its rule (the snapshot is not such an object), or
--          the count of ARGV is not 4
-- ERROR    EMQTYPE    the key holds another type than hash
local base = string.match(KEYS[1] or '', '^(emq:{[0-9A-Za-z_.%-]+}:)workers$')
if #KEYS ~= 1 or not base or #base > 71 then return redis.error_reply('EMQKEYS expected emq:{<q>}:workers') end
if #ARGV ~= 4 then return redis.error_reply('EMQARGS expected 4 ARGV: id, snapshot, ttl_ms, prune') end
local id, snap, ttl, prune = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
if #id < 1 or #id > 512 or string.find(id, '[%z\1-\31\127]') then
  return redis.error_reply('EMQARGS id must be 1 to 512 bytes with no control bytes')
end
if snap ~= '' then
  local ok, obj = pcall(cjson.decode, snap)
  if #snap > 65536 or string.sub(snap, 1, 2) ~= '{"' or string.sub(snap, -1) ~= '}' or not ok
    or type(obj) ~= 'table' or obj.at ~= nil or obj.exp ~= nil then
    return redis.error_reply('EMQARGS snapshot must be a JSON object of at most 65536 bytes, without at and exp, or ""')
  end
end
if #ttl > 8 or not string.match(ttl, '^[0-9]+$') or tonumber(ttl) < 1 or tonumber(ttl) > 86400000 then
  return redis.error_reply('EMQARGS ttl_ms must be an integer in [1, 86400000]')
end
if #prune > 4 or not string.match(prune, '^[0-9]+$') or tonumber(prune) > 1000 then
  return redis.error_reply('EMQARGS prune must be an integer in [0, 1000]')
end
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'hash' then return redis.error_reply('EMQTYPE ' .. KEYS[1] .. ' holds a ' .. kind .. ', not a hash') end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local pruned = 0
if tonumber(prune) > 0 and kind == 'hash' then
  local sample = redis.call('HRANDFIELD', KEYS[1], tonumber(prune) + 1, 'WITHVALUES')
  local checked = 0 -- the sample may miss the worker's own field: check prune others at most
  for i = 1, #sample, 2 do
    if sample[i] ~= id and checked < tonumber(prune) then
      checked = checked + 1
      local exp = tonumber(string.match(sample[i + 1], '^{"at":[0-9]+,"exp":([0-9]+)[,}]'))
      if not exp or exp < now then pruned = pruned + redis.call('HDEL', KEYS[1], sample[i]) end
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
