-- enqueue: add one job or a batch of jobs to a queue, all or nothing.
--
-- Each job gets a row of exactly three fields (state, attempts 0, payload) and goes to pending
-- (score 0: lex order is mint order), or to schedule when its run-at is later than the
-- server's TIME. Ids are minted by the caller (JOB ids). An id whose row exists is refused
-- (EMQEXISTS), but a row is gone once its job is retired, so a call whose reply was lost is
-- not sent again with the same ids: its jobs may have been claimed and retired meanwhile, and
-- would be added again with attempts 0, minting fencing tokens a worker of the first life may
-- still hold. A call that must be safe to repeat gives its jobs a key: a job may carry an
-- idempotency key, whose guard emq:{<q>}:uniq:<key> holds the first job's id for
-- uniq_ttl_ms, and while it lives an enqueue with the same key adds nothing and answers that
-- id. Every check runs before the first write, so a refused call writes nothing.
--
-- KEYS[1]  emq:{<q>}:pending            score-0 set; lex order is mint order
-- KEYS[2]  emq:{<q>}:schedule           scored by run-at (ms, server clock); its head (the
--          lowest run-at) is read when the call schedules its jobs
-- KEYS[3]  emq:{<q>}:meta               hash; read: paused = "1" suppresses the wake markers
-- KEYS[4]  emq:{<q>}:wake               list of wake-up markers (FORMAT wake)
-- ARGV[1]  at_ms        uint[0,999999999999999]  run-at of every job of the call in unix ms;
--          0 when not given; a run-at not later than the server's TIME means pending now
-- ARGV[2]  delay_ms     uint[0,999999999999999]  when at_ms is 0: run-at = server TIME +
--          delay_ms; 0 = now
-- ARGV[3]  uniq_ttl_ms  uint[0,999999999999999]  lifetime in ms of the guards this call
--          writes; it must be > 0 when a uniq_key is given. The Go bus passes
--          EnqueueOpts.UniqueTTL, else Config.UniqueTTL (default 86400000, 24 h)
-- ARGV[4]  max_payload  uint[0,999999999999999]  a payload longer than this many bytes
--          refuses the whole call; 0 = no limit of the caller's. Whatever is passed, a
--          payload over 536870912 bytes (512 MiB, the script's hard ceiling) is refused. The
--          Go bus passes Config.MaxPayload (default 524288, 512 KiB)
-- ARGV[5]  id*          jobid  a starred ARGV repeats: ARGV[5], [6], [7] describe the first
--          job, [8], [9], [10] the second, and so on (one job at least). id: the job's JOB
--          id, minted by the caller (FORMAT jobid); no id twice in one call
-- ARGV[6]  payload*     bytes  the job's payload, stored as it is (FORMAT envelope)
-- ARGV[7]  uniq_key*    id?    the job's idempotency key, "" for none
-- DERIVES  emq:{<q>}:job:<id>           each new job's row: KEYS[1] up to its type, "job:", id
-- DERIVES  emq:{<q>}:uniq:<key>         each key's guard: KEYS[1] up to its type, "uniq:", key
-- FORMAT   jobid    a JOB id is "JOB_" and 26 characters of Crockford's base32 alphabet
--          0123456789ABCDEFGHJKMNPQRSTVWXYZ (upper case; no I, L, O, U): 30 bytes, in ULID
--          layout: the 128-bit number made of the 48-bit unix milliseconds of its mint and 80
--          random bits, written 5 bits a character from the top, so the first character is
--          0-7. The client mints ids, and one client's ids must strictly increase (within one
--          millisecond, increment the random part instead of drawing it again), so lex order
--          is mint order: pending and dead are score-0 zsets in which ZRANGE is FIFO,
--          ZREVRANGE newest-first and ZRANGEBYLEX over "JOB_" and a time prefix a mint-time
--          range, with no second index.
-- FORMAT   envelope a task's payload, as the Go worker (bus.Worker) writes and reads it: the
--          task's kind (1 to 64 bytes of [A-Za-z0-9_.-]), one NUL byte, then the task's args,
--          which the Go side encodes as JSON: "email.send" \x00 {"to":"ada"}. The Go worker
--          sends a claimed job whose payload is not an envelope to dead at once, and fails
--          with backoff a job of a kind it has no handler for. The scripts store and return
--          payloads as opaque bytes: the envelope is between producers and workers.
--          Optionally a header block precedes the kind: one NUL byte, then each header as
--          <name> ":" <value> LF, then one LF, then the kind, NUL and args as above:
--          \x00 "traceparent:00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" \n \n
--          "email.send" \x00 {"to":"ada"}. A plain envelope never starts with NUL, so a reader
--          tells the two apart by the first byte. A name is 1 to 64 bytes of [a-z0-9-] and
--          appears once; a value is 0 to 1024 bytes of printable ASCII (0x20 to 0x7E); at most
--          32 headers and 8192 bytes from the NUL to the closing LF; a block that breaks a rule
--          makes the payload no envelope. Readers ignore names they do not know. traceparent
--          and tracestate carry the W3C trace context of the producer (trace-context level 1
--          formats), so a consumer in any runtime links its span to the producer's.
-- FORMAT   wake     a marker is one of two values. "1", work is pending: a script that makes a
--          job pending pushes one, and so does one that gives a lane its cap had stopped a
--          slot again, or resumes a lane (FORMAT lanes). "s", the schedule's head moved earlier: an enqueue that
--          schedules jobs whose run-at is earlier than the lowest run-at in schedule before the
--          call (or into an empty schedule) pushes one; fail and snooze push none when they
--          schedule a retry, since the worker that hands the job back knows its run-at and
--          wakes for it itself. Either marker is pushed only on a queue that is not paused
--          (meta field paused is not "1"), as LPUSH wake <marker>, then LTRIM wake 0 15. Idle
--          workers block on the list (BLPOP wake <timeout>): on "1" they claim; on "s" they
--          read the schedule's head again (the due script) to wake at its run-at, and claim
--          (claim promotes due jobs first); a value they do not know they take as "1". A worker
--          that pops a marker while it has no room for a job (its block was still waiting when
--          a claim filled it) pushes the marker back the same way, for an idle worker, even on
--          a queue paused since. A marker is a hint, never a job: a worker that times out claims
--          and reads the schedule's head all the same.
-- FORMAT   lanes    see laneclaim.lua
-- REPLY    {{id, created}, ...}: one pair per job, in order. created is 1 when the job was
--          added (id is its own); 0 when its key's guard already named a job, or an earlier
--          job of the same call had the same key (id is that job's id, and nothing was added)
-- ERROR    EMQKEYS    the KEYS are not one queue's pending, schedule, meta, wake
-- ERROR    EMQARGS    an ARGV does not meet its rule, the count is not 4 + 3n, an id repeats
--          in the call, or a uniq_key is given with uniq_ttl_ms 0
-- ERROR    EMQTOOBIG  a payload is longer than max_payload (or the hard ceiling)
-- ERROR    EMQEXISTS  a job row with one of the ids exists
-- ERROR    EMQTYPE    a key holds another type, or a guard holds no JOB id
local base = string.match(KEYS[1] or '', '^(emq:{[0-9A-Za-z_.%-]+}:)pending$')
if #KEYS ~= 4 or not base or #base > 71 or KEYS[2] ~= base .. 'schedule' or KEYS[3] ~= base .. 'meta'
  or KEYS[4] ~= base .. 'wake' then
  return redis.error_reply('EMQKEYS expected emq:{<q>}:pending, schedule, meta, wake of one queue')
end
local function uint(s, lo, hi)
  if #s <= 15 and string.match(s, '^[0-9]+$') then
    local n = tonumber(s)
    if n >= lo and n <= hi then return n end
  end
end
local function isjob(s)
  return #s == 30 and string.match(s, '^JOB_[0-7][0-9A-HJKMNP-TV-Z]+$') ~= nil
end
local MAX, CEILING = 999999999999999, 536870912
local at, delay, ttl, maxp = uint(ARGV[1] or '', 0, MAX), uint(ARGV[2] or '', 0, MAX), uint(ARGV[3] or '', 0, MAX), uint(ARGV[4] or '', 0, MAX)
if not at then return redis.error_reply('EMQARGS at_ms must be an integer in [0, 999999999999999]') end
if not delay then return redis.error_reply('EMQARGS delay_ms must be an integer in [0, 999999999999999]') end
if not ttl then return redis.error_reply('EMQARGS uniq_ttl_ms must be an integer in [0, 999999999999999]') end
if not maxp then return redis.error_reply('EMQARGS max_payload must be an integer in [0, 999999999999999]') end
if maxp == 0 or maxp > CEILING then maxp = CEILING end
local n = (#ARGV - 4) / 3
if n < 1 or n ~= math.floor(n) then
  return redis.error_reply('EMQARGS expected 4 ARGV then id, payload, uniq_key per job')
end
-- Every argument, before any key is read.
local ids = {}
for i = 1, n do
  local j = 5 + 3 * (i - 1)
  local id, payload, key = ARGV[j], ARGV[j + 1], ARGV[j + 2]
  if not isjob(id) then return redis.error_reply('EMQARGS ARGV[' .. j .. '] is not a JOB id') end
  if ids[id] then return redis.error_reply('EMQARGS ARGV[' .. j .. '] repeats id ' .. id) end
  ids[id] = true
  if key ~= '' then
    if #key > 512 or string.find(key, '[%z\1-\31\127]') then
      return redis.error_reply('EMQARGS ARGV[' .. (j + 2) .. '] is not 1 to 512 bytes without control bytes')
    end
    if ttl < 1 then return redis.error_reply('EMQARGS uniq_ttl_ms must be > 0 when a uniq_key is given') end
  end
  if #payload > maxp then
    return redis.error_reply('EMQTOOBIG ARGV[' .. (j + 1) .. '] is ' .. #payload .. ' bytes, more than max_payload ' .. maxp)
  end
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
-- Pass 1: the rows and guards, read; no write.
local out, byKey = {}, {}
for i = 1, n do
  local j = 5 + 3 * (i - 1)
  local id, key = ARGV[j], ARGV[j + 2]
  local jk = base .. 'job:' .. id
  if redis.call('EXISTS', jk) == 1 then return redis.error_reply('EMQEXISTS ' .. jk .. ' exists') end
  out[i] = {id, 1}
  if key ~= '' then
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
-- A scheduled call moves the schedule's head earlier when its run-at is before the head's.
local earlier = false
if not ready then
  local head = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  earlier = #head == 0 or runat < tonumber(head[2])
end
-- Pass 2: the writes.
local woke, scheduled = false, false
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
      scheduled = true
    end
    if key ~= '' then
      local gk = base .. 'uniq:' .. key
      redis.call('SET', gk, id, 'PX', ttl)
    end
  end
end
local marker = (woke and '1') or (scheduled and earlier and 's')
if marker and redis.call('HGET', KEYS[3], 'paused') ~= '1' then
  redis.call('LPUSH', KEYS[4], marker)
  redis.call('LTRIM', KEYS[4], 0, 15)
end
return out
