-- enqueue: add one job or a batch of jobs to a queue, all or nothing.
--
-- Each job gets a row of exactly three fields (state, attempts 0, payload) and goes to pending
-- (score 0: lex order is mint order), or to schedule when its run-at is later than the
-- server's TIME. Ids are minted by the caller (JOB ids), so a retried call can reuse them. A job
-- may carry an idempotency key: its guard emq:{<q>}:uniq:<key> holds the first job's id for
-- uniq_ttl_ms, and while it lives an enqueue with the same key adds nothing and answers that
-- id. Every check runs before the first write, so a refused call writes nothing. When a job
-- became pending and the queue is not paused, one marker is pushed on the wake list, which is
-- trimmed to its 16 newest markers: idle workers block on it.
--
-- KEYS[1]  emq:{<q>}:pending            score-0 set; lex order is mint order
-- KEYS[2]  emq:{<q>}:schedule           scored by run-at (ms)
-- KEYS[3]  emq:{<q>}:meta               hash; read: paused = "1" suppresses the wake marker
-- KEYS[4]  emq:{<q>}:wake               list of wake-up markers (the value "1"), at most 16
-- ARGV[1]  at_ms                        run-at of every job of the call in unix ms; 0 when not
--          given; a run-at not later than the server's TIME means pending now
-- ARGV[2]  delay_ms                     when at_ms is 0: run-at = server TIME + delay_ms; 0 = now
-- ARGV[3]  uniq_ttl_ms                  lifetime of the guards this call writes, an integer > 0
--          when any uniq_key is given (ignored otherwise)
-- ARGV[4]  max_payload                  a payload longer than this many bytes refuses the whole
--          call; 0 = no limit
-- ARGV[5]  id*                          a starred ARGV repeats: ARGV[5], [6], [7] describe the
--          first job, [8], [9], [10] the second, and so on (one job at least). id: the job's
--          JOB id ("JOB_" and 26 upper-case Crockford base32 characters, the first 0-7)
-- ARGV[6]  payload*                     the job's payload bytes
-- ARGV[7]  uniq_key*                    the job's idempotency key, "" for none; else 1 to 512
--          bytes with no control bytes
-- DERIVES  emq:{<q>}:job:<id>           each new job's row: KEYS[1] up to its type, "job:", id
-- DERIVES  emq:{<q>}:uniq:<key>         each key's guard: KEYS[1] up to its type, "uniq:", key
-- REPLY    {{id, created}, ...}: one pair per job, in order. created is 1 when the job was
--          added (id is its own); 0 when its key's guard already named a job, or an earlier
--          job of the same call had the same key (id is that job's id, and nothing was added)
-- ERRORS   EMQKEYS when the KEYS are not one queue's pending, schedule, meta, wake; EMQARGS
--          when an ARGV is not as declared or an id repeats in the call; EMQTOOBIG when a
--          payload is longer than max_payload; EMQEXISTS when a job row with that id exists;
--          EMQTYPE when a key holds another type or a guard holds no JOB id
local base = string.match(KEYS[1], '^(emq:{[%w_.%-]+}:)pending$')
if not base or #base > 71 or KEYS[2] ~= base .. 'schedule' or KEYS[3] ~= base .. 'meta' or KEYS[4] ~= base .. 'wake' then
  return redis.error_reply('EMQKEYS expected emq:{<q>}:pending, schedule, meta, wake of one queue')
end
local function uint(s)
  if #s <= 15 and string.match(s, '^%d+$') then return tonumber(s) end
end
local function isjob(s)
  return #s == 30 and string.match(s, '^JOB_[0-7][0-9A-HJKMNP-TV-Z]+$') ~= nil
end
local at, delay, ttl, maxp = uint(ARGV[1]), uint(ARGV[2]), uint(ARGV[3]), uint(ARGV[4])
if not at then return redis.error_reply('EMQARGS at_ms must be an integer >= 0') end
if not delay then return redis.error_reply('EMQARGS delay_ms must be an integer >= 0') end
if not ttl then return redis.error_reply('EMQARGS uniq_ttl_ms must be an integer >= 0') end
if not maxp then return redis.error_reply('EMQARGS max_payload must be an integer >= 0') end
local n = (#ARGV - 4) / 3
if n < 1 or n ~= math.floor(n) then
  return redis.error_reply('EMQARGS expected 4 ARGV then id, payload, uniq_key per job')
end
local function typeerr(key, got, want)
  if got ~= 'none' and got ~= want then return 'EMQTYPE ' .. key .. ' holds a ' .. got .. ', not a ' .. want end
end
local e = typeerr(KEYS[1], redis.call('TYPE', KEYS[1])['ok'], 'zset')
  or typeerr(KEYS[2], redis.call('TYPE', KEYS[2])['ok'], 'zset')
  or typeerr(KEYS[3], redis.call('TYPE', KEYS[3])['ok'], 'hash')
  or typeerr(KEYS[4], redis.call('TYPE', KEYS[4])['ok'], 'list')
if e then return redis.error_reply(e) end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local runat = at
if runat == 0 then runat = now + delay end
local ready = runat <= now
-- Pass 1: every check, no write.
local out, byKey, ids = {}, {}, {}
for i = 1, n do
  local j = 5 + 3 * (i - 1)
  local id, payload, key = ARGV[j], ARGV[j + 1], ARGV[j + 2]
  if not isjob(id) then return redis.error_reply('EMQARGS ARGV[' .. j .. '] is not a JOB id') end
  if ids[id] then return redis.error_reply('EMQARGS ARGV[' .. j .. '] repeats id ' .. id) end
  ids[id] = true
  if maxp > 0 and #payload > maxp then
    return redis.error_reply('EMQTOOBIG ARGV[' .. (j + 1) .. '] is ' .. #payload .. ' bytes, more than max_payload ' .. maxp)
  end
  local jk = base .. 'job:' .. id
  if redis.call('EXISTS', jk) == 1 then return redis.error_reply('EMQEXISTS ' .. jk .. ' exists') end
  out[i] = {id, 1}
  if key ~= '' then
    if #key > 512 or string.find(key, '%c') then
      return redis.error_reply('EMQARGS ARGV[' .. (j + 2) .. '] is not 1 to 512 bytes without control bytes')
    end
    if ttl < 1 then return redis.error_reply('EMQARGS uniq_ttl_ms must be > 0 when a uniq_key is given') end
    if byKey[key] then
      out[i] = {byKey[key], 0}
    else
      local gk = base .. 'uniq:' .. key
      e = typeerr(gk, redis.call('TYPE', gk)['ok'], 'string')
      if e then return redis.error_reply(e) end
      local held = redis.call('GET', gk)
      if held then
        if not isjob(held) then return redis.error_reply('EMQTYPE ' .. gk .. ' holds no JOB id') end
        out[i] = {held, 0}
        byKey[key] = held
      else
        byKey[key] = id
      end
    end
  end
end
-- Pass 2: the writes.
local woke = false
for i = 1, n do
  if out[i][2] == 1 then
    local j = 5 + 3 * (i - 1)
    local id, key = ARGV[j], ARGV[j + 2]
    local jk = base .. 'job:' .. id
    if ready then
      redis.call('HSET', jk, 'state', 'pending', 'attempts', 0, 'payload', ARGV[j + 1])
      redis.call('ZADD', KEYS[1], 0, id)
      woke = true
    else
      redis.call('HSET', jk, 'state', 'scheduled', 'attempts', 0, 'payload', ARGV[j + 1])
      redis.call('ZADD', KEYS[2], runat, id)
    end
    if key ~= '' then
      local gk = base .. 'uniq:' .. key
      redis.call('SET', gk, id, 'PX', ttl)
    end
  end
end
if woke and redis.call('HGET', KEYS[3], 'paused') ~= '1' then
  redis.call('LPUSH', KEYS[4], '1')
  redis.call('LTRIM', KEYS[4], 0, 15)
end
return out
