-- laneclaim: retire the jobs a worker finished, if any, then claim up to count jobs of a queue
-- that uses lanes, priorities or a rate: urgent jobs first, then the lanes with waiting work in
-- round robin by virtual time, each lane within its cap, its rate, its pause and its closure,
-- the whole call within the queue's rate.
--
-- A lane is a named sub-stream of the queue (FORMAT lanes). claim answers EMQLANES for a queue
-- that has any lane state, and this script claims it instead; for a queue without any it
-- claims exactly as claim does. The finished jobs are retired first as completemany retires
-- them (each fenced by its own token, the refused ones named, a cancelling job retired as an
-- active one, the failure histories deleted), and their lanes' slots are free for the claim
-- that follows, as completeclaim does for a queue without lanes. Per claimed job it is claim's
-- move: the row's attempts + 1 is the token, the row turns active, TIME plus lease_ms lands in
-- active. Due scheduled jobs are promoted first (at most promote_limit), each to the set its
-- lane and priority name. Every lane whose set is visited and found empty, whose cap is reached
-- or that is paused leaves laneready (a freed slot or a resume brings it back); one whose rate or
-- closure holds it back moves to lanewait, and comes back to laneready once its moment came.
-- A lane key of another type is skipped, never claimed from. An id whose row is missing or
-- is not a hash is dropped from the set it was taken from (and from joblane).
--
-- KEYS[1]  emq:{<q>}:pending            score-0 set: the jobs without a lane, priority 0
-- KEYS[2]  emq:{<q>}:active             scored by lease deadline (FORMAT lease)
-- KEYS[3]  emq:{<q>}:schedule           scored by run-at (ms); due ids move to their sets first
-- KEYS[4]  emq:{<q>}:meta               hash; field paused = "1" refuses the claim
-- KEYS[5]  emq:{<q>}:flow               hash (FORMAT lanes): rate, per, burst, lane, hold, vt,
--          waiting, lanesince
-- KEYS[6]  emq:{<q>}:lanes              hash: lane -> its own limits (FORMAT lanelimits)
-- KEYS[7]  emq:{<q>}:laneactive         hash: lane -> claimed jobs
-- KEYS[8]  emq:{<q>}:laneready          lanes with waiting work, by virtual time
-- KEYS[9]  emq:{<q>}:lanewait           held-back lanes, by the ms they may give work
-- KEYS[10] emq:{<q>}:joblane            hash: JOB id -> FORMAT joblane
-- KEYS[11] emq:{<q>}:urgent             waiting jobs of priority 1..3, score -priority
-- ARGV[1]  lease_ms       uint[1,999999999999999]  lease length in ms from server TIME; the Go
--          bus passes what it passes to claim
-- ARGV[2]  count          uint[1,999999999999999]  how many jobs to claim at most; one call
--          claims 1000 at most when the queue keeps lane state
-- ARGV[3]  promote_limit  uint[0,999999999999999]  how many due scheduled jobs to promote
--          before claiming, oldest run-at first; 0 promotes none
-- ARGV[4]  id*     jobid  a starred ARGV repeats: zero or more finished jobs to retire first,
--          the first in ARGV[4] and [5], the second in [6] and [7], and so on. id: its JOB id
-- ARGV[5]  token*  fence  the attempts count its claim returned
-- DERIVES  emq:{<q>}:job:<id>           each job's row: KEYS[1] up to its type, "job:", the id
-- DERIVES  emq:{<q>}:lanepending:<lane> each lane's waiting jobs: KEYS[1] up to its type,
--          "lanepending:", the lane
-- DERIVES  emq:{<q>}:lanelog:<lane>     each rated lane's claim times: KEYS[1] up to its type,
--          "lanelog:", the lane
-- DERIVES  emq:{<q>}:flowlog            the queue's claim times, when it has a rate (its type is
--          checked then): KEYS[1] up to its type, "flowlog"
-- DERIVES  emq:{<q>}:errors:<id>        each finished job's failure history: KEYS[1] up to its
--          type, "errors:", the id
-- FORMAT   jobid    see enqueue.lua
-- FORMAT   servertime  see claim.lua
-- FORMAT   lease    see claim.lua
-- FORMAT   fencing  see complete.lua
-- FORMAT   failure  see fail.lua
-- FORMAT   cancel   see cancel.lua
-- FORMAT   wake     see enqueue.lua
-- FORMAT   lanes    a lane is named like a queue (1 to 64 bytes of [A-Za-z0-9_.-]); the jobs
--          without a lane form the queue's own stream, written "" where a lane is named. A job's
--          lane and priority (0 to 3, 3 the most urgent; 0 by default) are given at enqueue
--          (laneenqueue) and kept in joblane, never in the row, which keeps its three fields.
--          A waiting job is in exactly one set: pending (no lane, priority 0), the lane's
--          lanepending:<lane> (priority 0) or urgent (priority 1 to 3, any lane or none). Every
--          script that makes a job of a lane wait again (fail, snooze, reap, retry, promote,
--          ratelimited, laneclaim's promote) puts it in that set; every script that takes a job
--          of a lane out of active (complete, completemany, fail, snooze, reap, ratelimited)
--          lowers laneactive's count of its lane by one (the field is deleted at 0) and, when
--          the lane is in neither laneready nor lanewait (its cap had stopped it), pushes the
--          wake marker "1" (FORMAT wake) unless the queue is paused, when the lane has waiting
--          jobs: with jobs in its lanepending:<lane> it first adds the lane to laneready at
--          the virtual clock; with none there, the marker is pushed when the queue's urgent
--          (emq:{<q>}:urgent, derived from the script's KEYS; read by a pcall ZCARD, a key of
--          another type reading as none) holds jobs, which may be the lane's (laneready is
--          not where urgent jobs are found). laneclaim's own retire path frees the slots for
--          the claim that follows in the same call, which reads urgent itself: it pushes no
--          marker. Each of those scripts reads joblane's
--          TYPE once per call, so a queue without lanes pays one command. A claim takes, in
--          order: the jobs of urgent, in its order (priority first, then mint order), whose
--          lane may give work; then, while it needs more, the lane with the lowest score in
--          laneready (ties by name, byte order) takes a turn: it gives its oldest jobs (mint
--          order), at least one and at most 32 (a turn), as many as the call still needs, its
--          set holds, its cap and both rates allow, after which the lane's score becomes
--          max(score, vt) + n / weight, n the jobs it gave, and vt (flow field vt, the virtual
--          clock, 0 when absent) becomes max(vt, score). A lane joins laneready at vt, so round
--          robin in turns is the default: over time each lane with waiting work gets the same
--          share of the claims (a weight of 2 twice the share), and within one claim no lane
--          gets more than one turn ahead of another. A claim of more jobs than a turn spans
--          lanes; claims of one job alternate lanes job by job. The member ""
--          is the queue's own stream (pending), with the lanes' default weight, no cap and no
--          rate of its own; laneclaim adds it when pending holds jobs. A lane may give work when
--          it is not paused, not held (its lanewait score, or flow field hold for "", is not
--          later than server TIME), its count in laneactive is below its cap and its rate
--          (FORMAT lanerate) allows one more claim; the queue's rate (flow fields rate, per,
--          burst; its claim times in flowlog) bounds every claim of the call. A lane's limits
--          are its own (lanes), field by field, else the flow field lane's; a rate and its
--          per and burst go together. Flow field lanesince (server ms, written by flowset when
--          the lanes' default rate changes, deleted when it is cleared) starts the default rate
--          afresh: a lane on the default rate counts no entry of its lanelog whose claim time
--          is not later than lanesince (an absent or non-numeric lanesince: every entry
--          counts); a claim it makes in lanesince's own millisecond is logged as made in the
--          next one, since an entry of that millisecond could be the old rate's and is
--          forgotten.
--          One call visits at most count + 64 jobs of urgent
--          (those whose lane may not give work use up none of what follows), then at most
--          count + 64 lanes. When laneready is left empty vt is deleted; when the queue keeps
--          no lane state (no joblane and no flow), laneready is deleted and plain claims serve
--          it.
-- FORMAT   joblane  the value of a job's field in joblane: "<priority>:<refunds>:<lane>",
--          priority a digit 0 to 3, refunds a decimal integer (how many of the job's claims a
--          RateLimited outcome handed back: fail and reap measure attempts minus refunds
--          against the maximum), lane the lane's name or "" for none: "0:0:acme", "3:0:". The
--          field is written at enqueue for a job with a lane or a priority, by ratelimited for
--          a job of the queue's own stream, and deleted with the row.
-- FORMAT   lanelimits  a lane's limits as one value: "<cap>:<rate>:<per>:<burst>:<weight>:<paused>",
--          each field a decimal integer or "" for unset: cap in [1, 1000000] (the most claimed
--          jobs of the lane at once), rate in [1, 1000000] claims per per ms, per in [1,
--          86400000] (default 1000 when rate is set), burst in [1, 100000] (default 1), weight
--          in [1, 1000] (default 1), paused "1" or "": "3:200:1000:20::" is a cap of 3 and 200
--          claims a second with bursts of 20.
-- FORMAT   lanerate  a rate of rate claims per per ms with burst b, on the server clock: T =
--          per / rate ms, the window W = b * T, the tolerance b * T - T. Two rules, both: (1)
--          GCRA: a claim at TIME is allowed when TIME >= tat - tolerance (tat absent: allowed),
--          and each claim sets tat to max(tat, TIME) + T, so claims come T apart over the long
--          run and a lane that fell behind catches up, at most b at once; (2) a window: at most b
--          claims in any W, so a claim is allowed when fewer than b of the log's claim times are
--          later than TIME - W. The log (a lane's lanelog, the queue's flowlog) holds the
--          latest claims, newest first, one entry "<ms>:<tat>" each (LPUSH then LTRIM 0 b-1):
--          the claim's TIME and the rate's tat after it; the newest entry's tat is the rate's.
--          When a call leaves the window full, the newest entry's tat is raised to (the moment
--          the window frees) + tolerance, so that the claims after a burst come T apart instead
--          of as one more burst. The log expires max(W, tat - TIME) + 1 ms after the call: an
--          absent log is a rate with nothing counted. So: b claims at once after a pause, then
--          one every T; rate claims per per over the long run; never more than b in any W.
-- REPLY    {flow, wait_ms, paused, retired, refused, id, payload, attempts, lane, ...}: flow
--          is 1 while the queue keeps lane state (claim answers EMQLANES), else 0; wait_ms is
--          how many ms from server TIME until a lane held back by its rate or a closure, or the
--          queue held by its own rate, may give work (0: claim again now, the call stopped at
--          its bound; -1: nothing is held, a freed slot pushes a wake marker; -1 too when the
--          call claimed count jobs: then it is not read); paused is 1 when
--          the queue is paused (finished jobs were given: they were retired, the lanes they gave a
--          slot back rejoin laneready when they have waiting jobs, and nothing was claimed),
--          else 0; retired and refused are completemany's reply for the finished jobs
--          (refused: {pos, reason, ...}, pos counting the finished jobs from 1); then one
--          quadruple per claimed job, in claim order: the JOB id, the payload bytes, the new
--          attempts count (the fencing token) and its lane ("" for none)
-- ERROR    EMQKEYS    the KEYS are not one queue's pending, active, schedule, meta, flow, lanes,
--          laneactive, laneready, lanewait, joblane, urgent
-- ERROR    EMQARGS    an ARGV does not meet its rule, or the count of ARGV is not 3 + 2n
-- ERROR    EMQTYPE    a declared key or a finished job's row holds another type, or flow's waiting or vt
--          is not a number
-- ERROR    EMQPAUSED  the queue is paused and no finished job is given (nothing is written)
local base = string.match(KEYS[1] or '', '^(emq:{[0-9A-Za-z_.%-]+}:)pending$')
if #KEYS ~= 11 or not base or #base > 71 or KEYS[2] ~= base .. 'active' or KEYS[3] ~= base .. 'schedule'
  or KEYS[4] ~= base .. 'meta' or KEYS[5] ~= base .. 'flow' or KEYS[6] ~= base .. 'lanes'
  or KEYS[7] ~= base .. 'laneactive' or KEYS[8] ~= base .. 'laneready' or KEYS[9] ~= base .. 'lanewait'
  or KEYS[10] ~= base .. 'joblane' or KEYS[11] ~= base .. 'urgent' then
  return redis.error_reply('EMQKEYS expected emq:{<q>}:pending, active, schedule, meta, flow, lanes, laneactive, laneready, lanewait, joblane, urgent of one queue')
end
local function uint(s, lo)
  if s and #s <= 15 and string.match(s, '^[0-9]+$') and tonumber(s) >= lo then return tonumber(s) end
end
local n = (#ARGV - 3) / 2
if n < 0 or n ~= math.floor(n) then
  return redis.error_reply('EMQARGS expected lease_ms, count, promote_limit, then id, token per finished job')
end
local lease, count, plimit = uint(ARGV[1], 1), uint(ARGV[2], 1), uint(ARGV[3], 0)
if not lease then return redis.error_reply('EMQARGS lease_ms must be an integer in [1, 999999999999999]') end
if not count then return redis.error_reply('EMQARGS count must be an integer in [1, 999999999999999]') end
if not plimit then return redis.error_reply('EMQARGS promote_limit must be an integer in [0, 999999999999999]') end
for i = 1, n do
  local id, token = ARGV[2 * i + 2], ARGV[2 * i + 3]
  if #id ~= 30 or not string.match(id, '^JOB_[0-7][0-9A-HJKMNP-TV-Z]+$') then
    return redis.error_reply('EMQARGS ARGV[' .. (2 * i + 2) .. '] is not a JOB id')
  end
  if #token > 15 or not string.match(token, '^[1-9][0-9]*$') then
    return redis.error_reply('EMQARGS ARGV[' .. (2 * i + 3) .. '] token must be an integer in [1, 999999999999999]')
  end
end
local function typeerr(key, got, want)
  if got ~= 'none' and got ~= want then return 'EMQTYPE ' .. key .. ' holds a ' .. got .. ', not a ' .. want end
end
-- Each key's type is checked once, before the first write: by TYPE, by its size (sized, below)
-- or by a read the call needs anyway, which fails on another type (TYPE then names it).
local has = {}
local function kind(i, got, want)
  has[i] = got ~= 'none'
  return typeerr(KEYS[i], got, want)
end
local function failed(r) return type(r) == 'table' and r['err'] end
-- A key's size (ZCARD of a zset, HLEN of a hash) checks it as TYPE does, for less: its reply is
-- an integer where TYPE's is a table. A key of another type fails it (TYPE then names the
-- type); sized answers that error, or notes whether the key exists.
local function sized(i, c)
  if failed(c) then return c['err'] end
  has[i] = c > 0 -- a zset or a hash is never empty
end
local f = sized(1, redis.pcall('ZCARD', KEYS[1]))
if f then return redis.error_reply(kind(1, redis.call('TYPE', KEYS[1])['ok'], 'zset') or f) end
f = sized(2, redis.pcall('ZCARD', KEYS[2]))
if f then return redis.error_reply(kind(2, redis.call('TYPE', KEYS[2])['ok'], 'zset') or f) end
f = sized(6, redis.pcall('HLEN', KEYS[6]))
if f then return redis.error_reply(kind(6, redis.call('TYPE', KEYS[6])['ok'], 'hash') or f) end
-- laneready's first page, the lanes the plan most likely visits first: read here, it is
-- laneready's type check, and their counts are read with the finished jobs' lanes' (one read
-- of laneactive). The plan reads it again only when the call added lanes to laneready.
local MAXCOUNT = 1000
local TURN = 32 -- the most jobs a lane gives in one turn (FORMAT lanes)
local PAGE = math.ceil(math.min(count, MAXCOUNT) / TURN)
local ready = redis.pcall('ZRANGE', KEYS[8], 0, PAGE - 1, 'WITHSCORES')
if failed(ready) then return redis.error_reply(kind(8, redis.call('TYPE', KEYS[8])['ok'], 'zset') or ready['err']) end
has[8] = #ready > 0 -- a zset is never empty
-- With finished jobs to retire, joblane is checked by the retire's read of it (below); without
-- any, here.
f = n == 0 and sized(10, redis.pcall('HLEN', KEYS[10]))
if f then return redis.error_reply(kind(10, redis.call('TYPE', KEYS[10])['ok'], 'hash') or f) end
f = sized(11, redis.pcall('ZCARD', KEYS[11]))
if f then return redis.error_reply(kind(11, redis.call('TYPE', KEYS[11])['ok'], 'zset') or f) end
local paused = redis.pcall('HGET', KEYS[4], 'paused')
if failed(paused) then return redis.error_reply(kind(4, redis.call('TYPE', KEYS[4])['ok'], 'hash') or paused['err']) end
local flow = redis.pcall('HMGET', KEYS[5], 'rate', 'per', 'burst', 'lane', 'hold', 'vt', 'waiting', 'lanesince')
if failed(flow) then return redis.error_reply(kind(5, redis.call('TYPE', KEYS[5])['ok'], 'hash') or flow['err']) end
for i = 1, 8 do has[5] = has[5] or flow[i] ~= false end
do -- vt (a ZADD score) and waiting (HINCRBY's integer): values the writes could not take
  local vt = flow[6] and tonumber(flow[6])
  if flow[7] and not (#flow[7] <= 18 and string.match(flow[7], '^%-?[0-9]+$')) or flow[6] and (not vt or vt ~= vt) then
    return redis.error_reply('EMQTYPE ' .. KEYS[5] .. ' holds a waiting that is not an integer or a vt that is not a number')
  end
end
if flow[1] then
  local e = typeerr(base .. 'flowlog', redis.call('TYPE', base .. 'flowlog')['ok'], 'list')
  if e then return redis.error_reply(e) end
end
paused = paused == '1'
if paused and n == 0 then return redis.error_reply('EMQPAUSED the queue is paused') end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local due = {}
if plimit > 0 and not paused then
  due = redis.pcall('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, plimit)
  if failed(due) then return redis.error_reply(kind(3, redis.call('TYPE', KEYS[3])['ok'], 'zset') or due['err']) end
else
  f = sized(3, redis.pcall('ZCARD', KEYS[3]))
  if f then return redis.error_reply(kind(3, redis.call('TYPE', KEYS[3])['ok'], 'zset') or f) end
end
-- lanewait's head, soonest first: the lanes among them whose moment came are due (64 at most).
local waithead = redis.pcall('ZRANGE', KEYS[9], 0, 63, 'WITHSCORES')
if failed(waithead) then return redis.error_reply(kind(9, redis.call('TYPE', KEYS[9])['ok'], 'zset') or waithead['err']) end
has[9] = #waithead > 0
local waitdue = {}
for i = 1, #waithead, 2 do
  if tonumber(waithead[i + 1]) > now then break end
  waitdue[#waitdue + 1] = waithead[i]
end
-- The finished jobs: read every row (one HMGET each) before the first write, as completemany.
local ok, refused, retired, again, rows = {}, {}, {}, {}, {}
for i = 1, n do
  local id, token = ARGV[2 * i + 2], ARGV[2 * i + 3]
  local reason
  local jk = base .. 'job:' .. id -- its row, kept for the retire's DEL
  if retired[id] then
    reason = 'EMQSTALE no row'
  else
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
    rows[#ok] = jk
    if token ~= '1' then again[#again + 1] = id end
  end
end
-- The joblane fields of a long list of ids, 1000 a call (unpack's bound).
local function joblanes(fields)
  if #fields <= 1000 then return redis.call('HMGET', KEYS[10], unpack(fields)) end
  local out = {}
  for i = 1, #fields, 1000 do
    local part = redis.call('HMGET', KEYS[10], unpack(fields, i, math.min(i + 999, #fields)))
    for j = 1, #part do out[i + j - 1] = part[j] end
  end
  return out
end
-- Their lanes, and those lanes' counts, read before the first write too.
local freed, actv, vals = {}, {}, {}
local fin = {} -- the lanes whose count the call changes: lane -> the new count
local names = {}
local tagged = 0 -- how many of ok have a joblane field
if #ok > 0 then
  -- joblane's type check (see above): a read of another type fails, and a field read tells the
  -- key exists; when none is, its size tells (below).
  for i = 1, #ok, 1000 do
    local part = redis.pcall('HMGET', KEYS[10], unpack(ok, i, math.min(i + 999, #ok)))
    if failed(part) then return redis.error_reply(kind(10, redis.call('TYPE', KEYS[10])['ok'], 'hash') or part['err']) end
    if i == 1 then vals = part else for j = 1, #part do vals[i + j - 1] = part[j] end end
  end
  local lanes = {} -- FORMAT joblane value -> its lane, false for none
  for i = 1, #ok do
    local v, lane = vals[i], nil
    if v then -- the jobs of a lane share their value: each one is parsed once
      tagged = tagged + 1
      lane = lanes[v]
      if lane == nil then
        lane = string.match(v, '^[0-3]:[0-9]+:(.+)$') or false
        lanes[v] = lane
      end
    end
    if lane then
      if not freed[lane] then names[#names + 1] = lane end
      freed[lane] = (freed[lane] or 0) + 1
    end
  end
end
if tagged > 0 then
  has[10] = true
elseif n > 0 then
  f = sized(10, redis.pcall('HLEN', KEYS[10]))
  if f then return redis.error_reply(kind(10, redis.call('TYPE', KEYS[10])['ok'], 'hash') or f) end
end
for i = 1, #ready, 2 do -- the first page's lanes: their counts for the plan
  local lane = ready[i]
  if lane ~= '' and not freed[lane] then names[#names + 1] = lane end
end
if #names > 0 then
  for from = 1, #names, 1000 do -- 1000 lanes a read (unpack's bound)
    local part = names
    if #names > 1000 then part = {unpack(names, from, math.min(from + 999, #names))} end
    local act = redis.pcall('HMGET', KEYS[7], unpack(part))
    if failed(act) then return redis.error_reply(kind(7, redis.call('TYPE', KEYS[7])['ok'], 'hash') or act['err']) end
    for i, lane in ipairs(part) do
      if freed[lane] then
        actv[lane] = math.max((tonumber(act[i]) or 0) - freed[lane], 0)
        fin[lane] = actv[lane]
      else
        actv[lane] = tonumber(act[i]) or 0
      end
    end
  end
else
  f = sized(7, redis.pcall('HLEN', KEYS[7]))
  if f then return redis.error_reply(kind(7, redis.call('TYPE', KEYS[7])['ok'], 'hash') or f) end
end
-- Retire them: one ZREM and one DEL per 1000; their joblane fields go with the rows. Their
-- lanes' counts go down (FORMAT lanes) in the one write of laneactive the call makes, after
-- the claim (flushActive): fin holds them until then.
if #ok > 0 then
  for i = 1, #ok, 1000 do
    redis.call('ZREM', KEYS[2], unpack(ok, i, math.min(i + 999, #ok)))
    redis.call('DEL', unpack(rows, i, math.min(i + 999, #rows)))
  end
  -- The failure histories (FORMAT failure) exist only for jobs whose token is > 1; see
  -- complete.lua for the pcall.
  for _, id in ipairs(again) do
    redis.pcall('DEL', base .. 'errors:' .. id)
  end
  local gone = ok
  if tagged < #ok then
    gone = {}
    for i, id in ipairs(ok) do
      if vals[i] then gone[#gone + 1] = id end
    end
  end
  for i = 1, #gone, 1000 do redis.call('HDEL', KEYS[10], unpack(gone, i, math.min(i + 999, #gone))) end
end
-- flushActive writes laneactive's counts of the lanes in fin (lane -> count), deleting those at 0.
local function flushActive(fin)
  local set, del = {}, {}
  for lane, c in pairs(fin) do
    if c > 0 then
      set[#set + 1] = lane
      set[#set + 1] = c
    else
      del[#del + 1] = lane
    end
  end
  for i = 1, #set, 2000 do redis.call('HSET', KEYS[7], unpack(set, i, math.min(i + 1999, #set))) end
  for i = 1, #del, 1000 do redis.call('HDEL', KEYS[7], unpack(del, i, math.min(i + 999, #del))) end
end
-- rejoin marks in into each lane the retired jobs gave a slot back that has waiting jobs and
-- is not in laneready: its cap may have taken it out, and nothing else brings it back.
local function rejoin(into)
  local names = {}
  for lane in pairs(freed) do names[#names + 1] = lane end
  for from = 1, #names, 1000 do
    local part = names
    if #names > 1000 then part = {unpack(names, from, math.min(from + 999, #names))} end
    local inready = redis.call('ZMSCORE', KEYS[8], unpack(part))
    for i, lane in ipairs(part) do
      if not inready[i] then
        local c = redis.pcall('ZCARD', base .. 'lanepending:' .. lane) -- an error: a damaged lane, skipped
        if type(c) == 'number' and c > 0 then into[lane] = true end
      end
    end
  end
end
if paused then
  -- Retired while the queue is paused: the freed lanes rejoin laneready now, at the virtual
  -- clock, and resume's wake marker finds them (none is pushed here: nothing is claimable).
  flushActive(fin)
  local back, adds = {}, {}
  rejoin(back)
  for lane in pairs(back) do
    adds[#adds + 1] = tonumber(flow[6]) or 0
    adds[#adds + 1] = lane
  end
  for i = 1, #adds, 2000 do redis.call('ZADD', KEYS[8], 'NX', unpack(adds, i, math.min(i + 1999, #adds))) end
  return {1, -1, 1, #ok, refused}
end

-- The plain case: no lane state at all. Exactly claim's moves.
if not (has[5] or has[8] or has[10]) then
  flushActive(fin) -- nothing: without joblane no retired job had a lane
  if #due > 0 then
    local add = {}
    for _, id in ipairs(due) do
      local jk = base .. 'job:' .. id
      if redis.call('TYPE', jk)['ok'] == 'hash' then
        redis.call('HSET', jk, 'state', 'pending')
        add[#add + 1] = 0
        add[#add + 1] = id
      end
    end
    for i = 1, #due, 1000 do redis.call('ZREM', KEYS[3], unpack(due, i, math.min(i + 999, #due))) end
    for i = 1, #add, 2000 do redis.call('ZADD', KEYS[1], unpack(add, i, math.min(i + 1999, #add))) end
  end
  local out, add = {0, -1, 0, #ok, refused}, {}
  local popped = redis.call('ZPOPMIN', KEYS[1], count)
  for i = 1, #popped, 2 do
    local id = popped[i]
    local jk = base .. 'job:' .. id
    local row = redis.pcall('HMGET', jk, 'attempts', 'payload')
    local att
    if not row['err'] and (row[1] or row[2]) then
      if not row[1] then
        att = 1
      elseif string.match(row[1], '^[0-9]+$') and #row[1] <= 15 then
        att = tonumber(row[1]) + 1
      end
    end
    if att then
      redis.call('HSET', jk, 'state', 'active', 'attempts', string.format('%d', att))
      add[#add + 1] = now + lease
      add[#add + 1] = id
      out[#out + 1] = id
      out[#out + 1] = row[2]
      out[#out + 1] = att
      out[#out + 1] = ''
    end
  end
  for i = 1, #add, 2000 do redis.call('ZADD', KEYS[2], unpack(add, i, math.min(i + 1999, #add))) end
  return out
end

count = math.min(count, MAXCOUNT)
local BOUND = count + 64
local vt = tonumber(flow[6]) or 0
local vt0 = vt
local waiting = 0 -- change of flow field waiting
local none = {}
local function limits(v)
  if not v then return none end
  local c, r, p, b, w, z = string.match(v, '^([0-9]*):([0-9]*):([0-9]*):([0-9]*):([0-9]*):(1?)$')
  return {cap = tonumber(c), rate = tonumber(r), per = tonumber(p), burst = tonumber(b), weight = tonumber(w), paused = z == '1'}
end
local defaults = limits(flow[4])
-- The moment the lanes' default rate last changed (flowset): a lane on the default rate counts
-- none of its log's entries from before it (FORMAT lanes).
local lanesince = tonumber(flow[8])
-- A lane's set is usable when it is a zset or absent; the answer is kept for the call.
local usable = {}
local function lanekey(lane)
  if usable[lane] == nil then
    local ty = redis.call('TYPE', base .. 'lanepending:' .. lane)['ok']
    usable[lane] = ty == 'zset' or ty == 'none'
  end
  return usable[lane]
end
local function parse(v)
  local p, r, lane = string.match(v or '', '^([0-3]):([0-9]+):(.*)$')
  return p, lane
end

-- Promote due scheduled jobs, each to the set of its lane and priority.
local readyAdd = {}
if #due > 0 then
  local vals = {}
  if #due > 0 and has[10] then vals = joblanes(due) end
  for i, id in ipairs(due) do
    local p, lane = parse(vals[i])
    if not (p == '0' and lane ~= '' and not lanekey(lane)) then -- a damaged lane's job stays scheduled
      redis.call('ZREM', KEYS[3], id)
      local jk = base .. 'job:' .. id
      if redis.call('TYPE', jk)['ok'] == 'hash' then
        redis.call('HSET', jk, 'state', 'pending')
        if p and p ~= '0' then
          redis.call('ZADD', KEYS[11], -tonumber(p), id)
          has[11] = true
        elseif p and lane ~= '' then
          redis.call('ZADD', base .. 'lanepending:' .. lane, 0, id)
          waiting = waiting + 1
          readyAdd[lane] = true
        else
          redis.call('ZADD', KEYS[1], 0, id)
          has[1] = true
        end
      end
    end
  end
end
-- Lanes whose moment came leave lanewait for laneready; the queue's own hold expires.
local hold = tonumber(flow[5])
if hold and hold <= now then
  redis.call('HDEL', KEYS[5], 'hold')
  hold = nil
end
for _, lane in ipairs(waitdue) do
  redis.call('ZREM', KEYS[9], lane)
  readyAdd[lane] = true
end
if not hold and has[1] and redis.call('ZCARD', KEYS[1]) > 0 then readyAdd[''] = true end
-- A lane the retired jobs gave a slot back, with waiting jobs, rejoins laneready.
rejoin(readyAdd)
local adds = {}
for lane in pairs(readyAdd) do
  adds[#adds + 1] = vt
  adds[#adds + 1] = lane
end
for i = 1, #adds, 2000 do redis.call('ZADD', KEYS[8], 'NX', unpack(adds, i, math.min(i + 1999, #adds))) end

-- Plan: which jobs to take, reading only.
-- laneready is read a page at a time (as many lanes as full turns would serve), as the plan
-- needs more; nothing writes it before the plan is done, so its ranks hold. Only the first
-- page's lanes are read up front (prefetch): a claim most often takes all it needs from them.
-- The first page was read before the retire; when the call has added lanes since, again here.
if #adds > 0 then ready = redis.call('ZRANGE', KEYS[8], 0, PAGE - 1, 'WITHSCORES') end
local loaded = #ready / 2
local uids = {}
if has[11] then uids = redis.call('ZRANGE', KEYS[11], 0, BOUND - 1) end
local ulane = {}
if #uids > 0 then
  local vals = joblanes(uids)
  for i, id in ipairs(uids) do
    local _, lane = parse(vals[i])
    ulane[id] = lane or ''
  end
end
-- Each lane's state, read the first time the plan looks at the lane: its limits, its count,
-- its hold. The lanes the plan will most likely visit (those of urgent, and those of
-- the first page of laneready) are read up front, three commands for all of them.
local st = {}
local function state(lane, own, act, held)
  local o = limits(own)
  local s = {active = tonumber(act) or 0, taken = 0, rr = 0, paused = o.paused, ok = true,
    held = held and tonumber(held) > now, cap = o.cap or defaults.cap, weight = o.weight or defaults.weight or 1}
  local rate, per, burst, since = o.rate, o.per, o.burst, nil
  if not rate then rate, per, burst, since = defaults.rate, defaults.per, defaults.burst, lanesince end
  if rate then
    s.log = {lane = lane, b = burst or 1, t = (per or 1000) / rate, used = 0, since = since}
    local lt = redis.call('TYPE', base .. 'lanelog:' .. lane)['ok']
    s.ok = lt == 'list' or lt == 'none'
  end
  st[lane] = s
  return s
end
local function prefetch(names)
  if #names == 0 then return end
  local own, held = {}, {} -- absent keys are not read
  if has[6] then own = redis.call('HMGET', KEYS[6], unpack(names)) end
  if has[9] then held = redis.call('ZMSCORE', KEYS[9], unpack(names)) end
  local unknown = {}
  for _, lane in ipairs(names) do
    if not actv[lane] then unknown[#unknown + 1] = lane end
  end
  if #unknown > 0 then
    local act = redis.call('HMGET', KEYS[7], unpack(unknown))
    for i, lane in ipairs(unknown) do actv[lane] = tonumber(act[i]) or 0 end
  end
  for i, lane in ipairs(names) do state(lane, own[i], actv[lane], held[i]) end
end
local function lanestate(lane)
  local s = st[lane]
  if s then return s end
  local act = actv[lane] or redis.call('HGET', KEYS[7], lane)
  local own, held = false, false
  if has[6] then own = redis.call('HGET', KEYS[6], lane) end
  if has[9] then held = redis.call('ZSCORE', KEYS[9], lane) end
  return state(lane, own, act, held)
end
do
  local names, known = {}, {['']= true}
  local function note(lane)
    if not known[lane] then
      known[lane] = true
      names[#names + 1] = lane
    end
  end
  for _, id in ipairs(uids) do note(ulane[id]) end
  for i = 1, #ready, 2 do note(ready[i]) end
  prefetch(names)
end
st[''] = {active = 0, taken = 0, rr = 0, ok = true, weight = defaults.weight or 1, held = hold ~= nil}
-- The queue's rate.
local qlog
if tonumber(flow[1]) then
  local b = tonumber(flow[3]) or 1
  qlog = {b = b, t = (tonumber(flow[2]) or 1000) / tonumber(flow[1]), used = 0}
end
-- A rate (FORMAT lanerate): g.t is its spacing T (per / rate ms), g.b its burst; its window W
-- is b * T and its tolerance b * T - T. g.tat is the theoretical arrival time, read from the
-- log's newest entry and advanced by each claim the plan takes (g.used).
local function load(g)
  if g.loaded then return end
  g.loaded = true
  local key = base .. 'flowlog'
  if g.lane then key = base .. 'lanelog:' .. g.lane end
  local head = redis.call('LINDEX', key, 0)
  g.tat0 = tonumber(string.match(head or '', ':([0-9.]+)$'))
  if g.since and (tonumber(string.match(head or '', '^([0-9]+):')) or 0) <= g.since then g.tat0 = nil end
  g.tat = g.tat0
end
-- claimAt is the claim time of the entry at idx of a rate's log (nil when there is none). The
-- checks of one call walk the log from its oldest countable entry towards its head, an entry a
-- claim: each LRANGE reads the entry with the 31 before it, kept until the call writes the log.
local function claimAt(g, idx)
  local w = g.win
  if not w or idx < w.lo or idx > w.hi then
    local key = base .. 'flowlog'
    if g.lane then key = base .. 'lanelog:' .. g.lane end
    local lo = math.max(idx - 31, 0)
    w = {lo = lo, hi = idx, v = redis.call('LRANGE', key, lo, idx)}
    g.win = w
  end
  local v = w.v[idx - w.lo + 1]
  if v then return tonumber(string.match(v, '^([0-9]+)')) end
end
-- can reports whether a rate allows one more claim now; when not, g.next is the ms from
-- which it may.
local function can(g)
  if not g then return true end
  load(g)
  local w, tau = g.b * g.t, (g.b - 1) * g.t
  if g.tat and now < g.tat - tau then
    g.next = math.ceil(g.tat - tau)
    return false
  end
  local idx = g.b - 1 - g.used
  if idx < 0 then
    g.next = math.ceil(now + w)
    return false
  end
  local v = claimAt(g, idx)
  if v and v > now - w and not (g.since and v <= g.since) then
    g.next = math.ceil(v + w)
    return false
  end
  return true
end
local function eligible(s)
  return s.ok and not s.paused and not s.held and not (s.cap and s.active + s.taken >= s.cap) and can(s.log)
end
local function grant(g)
  if g then
    g.used = g.used + 1
    g.tat = math.max(g.tat or now, now) + g.t
  end
end
local function take(s)
  s.taken = s.taken + 1
  grant(s.log)
  grant(qlog)
end

local got, visits, stopped, short = 0, 0, false, false
local urgentTake = {}
-- The jobs of urgent read (BOUND at most) have a budget of their own, so urgent jobs that
-- cannot be given (their lane at its cap) never use up the round robin's. uwait is the
-- earliest moment a lane held back by its rate alone may give the urgent job it holds.
local uwait
for _, id in ipairs(uids) do
  if got >= count then break end
  local s = lanestate(ulane[id])
  if eligible(s) then
    if not can(qlog) then
      stopped = true
      break
    end
    take(s)
    urgentTake[#urgentTake + 1] = id
    got = got + 1
  elseif s.ok and not s.paused and not s.held and not (s.cap and s.active + s.taken >= s.cap) and s.log and s.log.next then
    if not uwait or s.log.next < uwait then uwait = s.log.next end
  end
end

-- Round robin over laneready, kept locally in score order (ties by name, byte order).
-- Lua compares strings by the server's collation; in the C locale that is byte order, which
-- these probes of the name alphabet tell, and then "<" serves.
local bytewise = ('B' < 'a') and ('-' < '.') and ('.' < '0') and ('9' < 'A') and ('Z' < '_') and ('_' < 'a')
local function before(s1, a, s2, b)
  if s1 ~= s2 then return s1 < s2 end
  if bytewise then return a < b end
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end
local entries, hd = {}, 1 -- the lanes still to visit are entries[hd..], in score order
-- While laneready has lanes not loaded yet, edgeScore and edgeLane are the last loaded one's:
-- the lanes not loaded all come after it. A served lane whose new place is after the edge
-- waits in later (in score order) until the next page tells where it goes.
local edgeScore, edgeLane
local later = {}
local function insert(list, from, e) -- into list[from..], in score order: a binary search
  local lo, hi = from, #list + 1
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if before(e.score, e.lane, list[mid].score, list[mid].lane) then hi = mid else lo = mid + 1 end
  end
  table.insert(list, lo, e)
end
-- page makes the lanes of a page of laneready, with those of later that come before its edge
-- (all of them after the last page), the lanes to visit.
local function page(list)
  local fresh = {}
  for i = 1, #list, 2 do fresh[#fresh + 1] = {lane = list[i], score = tonumber(list[i + 1])} end
  edgeScore, edgeLane = nil, nil
  if #list / 2 >= PAGE then edgeScore, edgeLane = fresh[#fresh].score, fresh[#fresh].lane end
  entries, hd = {}, 1
  local keep, i = {}, 1
  for _, l in ipairs(later) do
    if edgeLane and not before(l.score, l.lane, edgeScore, edgeLane) then
      keep[#keep + 1] = l
    else
      while fresh[i] and before(fresh[i].score, fresh[i].lane, l.score, l.lane) do
        entries[#entries + 1] = fresh[i]
        i = i + 1
      end
      entries[#entries + 1] = l
    end
  end
  for k = i, #fresh do entries[#entries + 1] = fresh[k] end
  later = keep
end
page(ready)
local unready, score, waitAt, plan = {}, {}, {}, {}
local pendingLeft = -1 -- jobs in pending, read when "" is first served
local function count_of(lane)
  if lane == '' then
    if pendingLeft < 0 then pendingLeft = redis.call('ZCARD', KEYS[1]) end
    return pendingLeft
  end
  local s = st[lane]
  if not s.n then
    s.n = redis.pcall('ZCARD', base .. 'lanepending:' .. lane)
    if type(s.n) ~= 'number' then s.n, s.ok = 0, false end -- a damaged lane gives nothing
  end
  return s.n
end
while got < count and not stopped do
  if hd > #entries then
    if not edgeLane then break end -- every lane is loaded, and every served one is in entries
    local list = redis.call('ZRANGE', KEYS[8], loaded, loaded + PAGE - 1, 'WITHSCORES')
    loaded = loaded + #list / 2
    page(list)
    if hd > #entries then break end
  end
  if visits >= BOUND then
    short = true
    break
  end
  visits = visits + 1
  local e = entries[hd]
  entries[hd] = false
  hd = hd + 1
  local s = lanestate(e.lane)
  -- A turn gives up to TURN jobs, as many as the claim still needs and the lane's cap allows.
  -- A lane's first turn of one job assumes its set holds one (it is in laneready); other
  -- turns count its jobs.
  local room = math.min(TURN, count - got)
  if s.cap then room = math.min(room, s.cap - s.active - s.taken) end
  local left = 1
  if s.rr > 0 or e.lane == '' or room > 1 then left = count_of(e.lane) - s.rr end
  if not s.ok or s.paused or s.held or left <= 0 or room <= 0 then
    unready[e.lane] = true
  elseif not can(s.log) then
    unready[e.lane] = true
    waitAt[e.lane] = s.log.next
  elseif not can(qlog) then
    stopped = true
    hd = hd - 1 -- not visited after all: it stays first
    entries[hd] = e
  else
    -- The first job is allowed (above); each further one while both rates allow it.
    room = math.min(room, left)
    local k = room
    if s.log and not qlog and room > 1 then
      -- The loop below with take and can of the lane's one rate written out, the rate's fields
      -- in locals: the same arithmetic in the same order, without seven calls a job.
      local g = s.log
      local t, b, since, used, tat = g.t, g.b, g.since, g.used, g.tat
      local w, tau = b * t, (b - 1) * t
      k = 0
      while true do
        used = used + 1 -- take: grant of the lane's rate
        if not tat or now > tat then tat = now + t else tat = tat + t end
        k = k + 1
        if k >= room then break end
        if now < tat - tau then -- can, as it reads tat, the log's window and since
          g.next = math.ceil(tat - tau)
          break
        end
        local idx = b - 1 - used
        if idx < 0 then
          g.next = math.ceil(now + w)
          break
        end
        local v = claimAt(g, idx)
        if v and v > now - w and not (since and v <= since) then
          g.next = math.ceil(v + w)
          break
        end
      end
      s.taken, g.used, g.tat = s.taken + k, used, tat
    elseif s.log or qlog then
      k = 0
      repeat
        take(s)
        k = k + 1
      until k >= room or not (can(s.log) and can(qlog))
    else
      s.taken = s.taken + k
    end
    s.rr = s.rr + k
    got = got + k
    plan[#plan + 1] = e.lane
    plan[#plan + 1] = k
    local ns = math.max(e.score, vt) + k / s.weight
    vt = math.max(vt, e.score)
    e.score = ns
    score[e.lane] = ns
    if not edgeLane or before(ns, e.lane, edgeScore, edgeLane) then
      insert(entries, hd, e)
    else
      insert(later, 1, e)
    end
  end
end


-- Write: pop what the plan took, claim the rows, account the lanes.
local out = {1, -1, 0, #ok, refused}
local active, claimedIn = {}, {}
local gone = {}
local deadline, no, na = now + lease, 5, 0 -- the lease's end; how many entries out and active hold
-- One read (HMGET attempts, payload) and one write (HSET state, attempts) per row, as claim.
local function claimRow(id, lane)
  local jk = base .. 'job:' .. id
  local row = redis.pcall('HMGET', jk, 'attempts', 'payload')
  local att
  if not row['err'] and (row[1] or row[2]) then
    if not row[1] then
      att = 1
    elseif string.match(row[1], '^[0-9]+$') and #row[1] <= 15 then
      att = tonumber(row[1]) + 1
    end
  end
  if not att then
    gone[#gone + 1] = id
    return
  end
  redis.call('HSET', jk, 'state', 'active', 'attempts', string.format('%d', att))
  active[na + 1], active[na + 2], na = deadline, id, na + 2
  out[no + 1], out[no + 2], out[no + 3], out[no + 4], no = id, row[2], att, lane, no + 4
  return true
end
if #urgentTake > 0 then
  redis.call('ZREM', KEYS[11], unpack(urgentTake))
  for _, id in ipairs(urgentTake) do
    local lane = ulane[id]
    if claimRow(id, lane) then claimedIn[lane] = (claimedIn[lane] or 0) + 1 end
  end
end
local poppedBy = {}
for lane, s in pairs(st) do
  if s.rr > 0 then
    local popped
    if lane == '' then
      popped = redis.call('ZPOPMIN', KEYS[1], s.rr)
    else
      popped = redis.pcall('ZPOPMIN', base .. 'lanepending:' .. lane, s.rr)
      if popped['err'] then popped = {} end -- a damaged lane gives nothing
      waiting = waiting - #popped / 2
    end
    if #popped / 2 < s.rr then
      short = true -- the set held fewer than the plan assumed: claim again at once
      unready[lane] = true
      score[lane] = nil
    end
    poppedBy[lane] = {next = 1, ids = popped}
  end
end
for i = 1, #plan, 2 do -- in the order of the plan: a lane, how many of its jobs
  local lane = plan[i]
  local p, n = poppedBy[lane], 0
  local ids, at = p.ids, p.next
  for _ = 1, plan[i + 1] do
    local id = ids[2 * at - 1]
    if not id then break end
    at = at + 1
    if claimRow(id, lane) then n = n + 1 end
  end
  p.next = at
  claimedIn[lane] = (claimedIn[lane] or 0) + n
end
if #gone > 0 and has[10] then redis.call('HDEL', KEYS[10], unpack(gone)) end
for i = 1, #active, 2000 do redis.call('ZADD', KEYS[2], unpack(active, i, math.min(i + 1999, #active))) end
-- Counts, rates, and each lane's place in laneready after the claim.
-- push logs the n claims a rate granted: one entry "<now>:<tat>" each, the newest holding the
-- rate's tat; when the log's window is full after them, tat is raised so the rate's next claim
-- is not before the window frees (no pulse of a whole burst: the claims after it come spaced).
local function push(g, n)
  if not g or n == 0 then return end
  local w, tau = g.b * g.t, (g.b - 1) * g.t
  local at = now -- after a change of the default rate, never in its millisecond (FORMAT lanes)
  if g.since and at <= g.since then at = g.since + 1 end
  local tat = g.tat0
  local entries = {}
  for i = 1, n do
    if not tat or now > tat then tat = now + g.t else tat = tat + g.t end -- math.max(tat or now, now) + g.t
    entries[i] = tat
  end
  local key = base .. 'flowlog'
  if g.lane then key = base .. 'lanelog:' .. g.lane end
  local free
  local idx = g.b - 1 - n
  if idx < 0 then
    free = at + w
  else
    local v = claimAt(g, idx)
    if v and v > now - w and not (g.since and v <= g.since) then free = v + w end
  end
  if free and tat - tau < free then tat = free + tau end
  entries[n] = tat
  local head = at .. ':' -- made once, not once an entry
  for i = 1, n do entries[i] = head .. string.format('%.3f', entries[i]) end
  redis.call('LPUSH', key, unpack(entries))
  redis.call('LTRIM', key, 0, g.b - 1)
  redis.call('PEXPIRE', key, math.ceil(math.max(w, tat - now)) + 1)
  g.used, g.tat0, g.tat, g.win = 0, tat, tat, nil
end
local qn = 0
for lane, s in pairs(st) do
  local n = claimedIn[lane] or 0
  qn = qn + n
  if lane ~= '' then
    if n > 0 then
      fin[lane] = s.active + n
      push(s.log, n)
    end
    s.active, s.taken = s.active + n, 0
    if score[lane] then
      if s.n and s.n - s.rr <= 0 then
        unready[lane] = true
      elseif s.cap and s.active >= s.cap then
        unready[lane] = true
      elseif s.log and not can(s.log) then
        unready[lane] = true
        waitAt[lane] = s.log.next
      end
    end
  elseif score[lane] and pendingLeft >= 0 and pendingLeft - s.rr <= 0 then
    unready[lane] = true
  end
end
push(qlog, qn)
flushActive(fin)
local rem, zadd, wadd = {}, {}, {}
for lane in pairs(unready) do rem[#rem + 1] = lane end
for lane, sc in pairs(score) do
  if not unready[lane] then
    zadd[#zadd + 1] = sc
    zadd[#zadd + 1] = lane
  end
end
for lane, at in pairs(waitAt) do
  wadd[#wadd + 1] = at
  wadd[#wadd + 1] = lane
end
if #rem > 0 then redis.call('ZREM', KEYS[8], unpack(rem)) end
if #zadd > 0 then redis.call('ZADD', KEYS[8], unpack(zadd)) end
if #wadd > 0 then redis.call('ZADD', KEYS[9], unpack(wadd)) end
-- flow's waiting and vt, in one HSET and one HDEL at most: waiting was read with the rest of
-- flow, and nothing else in the call writes it.
local fset, fdel = {}, {}
if waiting ~= 0 then
  local w = (tonumber(flow[7]) or 0) + waiting
  if w > 0 then
    fset[#fset + 1] = 'waiting'
    fset[#fset + 1] = string.format('%d', w)
  else
    fdel[#fdel + 1] = 'waiting'
  end
end
if #zadd == 0 and redis.call('EXISTS', KEYS[8]) == 0 then -- laneready holds the lanes just scored
  if vt0 ~= 0 then fdel[#fdel + 1] = 'vt' end
elseif vt ~= vt0 then
  fset[#fset + 1] = 'vt'
  fset[#fset + 1] = vt
end
if #fset > 0 then redis.call('HSET', KEYS[5], unpack(fset)) end
if #fdel > 0 then redis.call('HDEL', KEYS[5], unpack(fdel)) end
-- When the next work is due: read only when the call claimed fewer than count.
local wait = -1
if short then
  wait = 0
elseif got < count then
  local head = redis.call('ZRANGE', KEYS[9], 0, 0, 'WITHSCORES')
  if #head > 0 then wait = math.max(tonumber(head[2]) - now, 0) end
  if hold and (wait < 0 or hold - now < wait) then wait = hold - now end
  if stopped and qlog and qlog.next and (wait < 0 or qlog.next - now < wait) then wait = math.max(qlog.next - now, 0) end
  if uwait and (wait < 0 or uwait - now < wait) then wait = math.max(uwait - now, 0) end
end
out[2] = wait
local laned = #urgentTake > 0 -- a claimed job of a lane or a priority keeps its joblane field
for lane in pairs(claimedIn) do laned = laned or lane ~= '' end
if not laned and redis.call('EXISTS', KEYS[10], KEYS[5]) == 0 then
  redis.call('DEL', KEYS[8])
  out[1] = 0
end
return out
