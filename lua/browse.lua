-- browse: read one page of a queue's active or schedule set in score order (lease deadline or
-- run-at), each job with its row's attempts, in one atomic snapshot. Writes nothing.
--
-- A set is ordered by score, then by member as bytes (Valkey's own order); jobs claimed in one
-- call share a deadline, so ties are common and are ordered by id. The cursor is the last
-- entry of the previous page, (after_score, after_id): an oldest-first page starts right after
-- it, a newest-first page ends right before it, whether or not that job is still in the set,
-- so paging neither repeats nor skips a job that stays in the set while others come and go.
--
-- KEYS[1]  emq:{<q>}:active             scored by lease deadline (FORMAT lease)
-- KEYS[2]  emq:{<q>}:schedule           scored by run-at (ms, server clock)
-- ARGV[1]  set          uint[0,1]  0 browses active, 1 schedule
-- ARGV[2]  newest       uint[0,1]  0 lists from the lowest score up, 1 from the highest down
-- ARGV[3]  limit        uint[1,1000]  the page's size at most. The Go bus passes
--          BrowseOpts.Limit, else 100
-- ARGV[4]  after_score  bytes[1,16]  the cursor's score (ms), 0 with no cursor: a decimal
--          integer, ^[0-9]+$ (no sign, exponent, point, space or hex), at most
--          9007199254740991 (2^53 - 1, up to which Lua's numbers hold every integer). A run-at
--          or a lease deadline is server TIME plus up to 999999999999999 ms (a delay, a
--          backoff, a lease), so a score may take 16 digits, past a uint's 15
-- ARGV[5]  after_id     jobid?  the cursor's JOB id; "" starts at the head of the order
-- DERIVES  emq:{<q>}:job:<id>           each listed job's row: KEYS[1] up to its type, "job:",
--          the id
-- FORMAT   jobid    see enqueue.lua
-- FORMAT   lease    see claim.lua
-- FORMAT   fencing  see complete.lua
-- REPLY    {more, entries}: entries is a flat list {id, score, attempts, id, score, attempts,
--          ...} in page order, score the set's score (ms) and attempts the row's attempts
--          (for an active job the lease holder's token, FORMAT fencing), both integers,
--          attempts 0 when the row is missing or is not a hash; more is 1 when the set
--          holds entries past the page in its direction, else 0
-- ERROR    EMQKEYS    the KEYS are not one queue's active, schedule
-- ERROR    EMQARGS    an ARGV does not meet its rule, after_score is not such an integer or
--          is not 0 without after_id, or the count of ARGV is not 5
-- ERROR    EMQTYPE    a key holds another type
local base = string.match(KEYS[1] or '', '^(emq:{[0-9A-Za-z_.%-]+}:)active$')
if #KEYS ~= 2 or not base or #base > 71 or KEYS[2] ~= base .. 'schedule' then
  return redis.error_reply('EMQKEYS expected emq:{<q>}:active, schedule of one queue')
end
if #ARGV ~= 5 then return redis.error_reply('EMQARGS expected 5 ARGV: set, newest, limit, after_score, after_id') end
local function uint(s, hi, digits)
  if s and #s <= digits and string.match(s, '^[0-9]+$') and tonumber(s) <= hi then return tonumber(s) end
end
-- A score takes 16 digits (see ARGV[4]); past 2^53 - 1 tonumber would round, so that is the bound.
local which, newest, limit, score = uint(ARGV[1], 1, 15), uint(ARGV[2], 1, 15), uint(ARGV[3], 1000, 15), uint(ARGV[4], 9007199254740991, 16)
if not which then return redis.error_reply('EMQARGS set must be 0 or 1') end
if not newest then return redis.error_reply('EMQARGS newest must be 0 or 1') end
if not limit or limit < 1 then return redis.error_reply('EMQARGS limit must be an integer in [1, 1000]') end
if not score then return redis.error_reply('EMQARGS after_score must be an integer in [0, 9007199254740991]') end
local after = ARGV[5]
if after ~= '' and (#after ~= 30 or not string.match(after, '^JOB_[0-7][0-9A-HJKMNP-TV-Z]+$')) then
  return redis.error_reply('EMQARGS ARGV[5] is not a JOB id')
end
if after == '' and score ~= 0 then return redis.error_reply('EMQARGS after_score must be 0 without after_id') end
local function typeerr(key, got, want)
  if got ~= 'none' and got ~= want then return 'EMQTYPE ' .. key .. ' holds a ' .. got .. ', not a ' .. want end
end
local e = typeerr(KEYS[1], redis.call('TYPE', KEYS[1])['ok'], 'zset')
  or typeerr(KEYS[2], redis.call('TYPE', KEYS[2])['ok'], 'zset')
if e then return redis.error_reply(e) end
local key = KEYS[1]
if which == 1 then
  key = KEYS[2]
end
-- before: a < b as bytes, whatever the server's locale does to Lua's string comparison.
local function before(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end
-- rank: how many entries come before the cursor (with the cursor's own entry when past is
-- true): the entries of lower score, then a binary search of the block of equal score by id.
local function rank(past)
  local lo = redis.call('ZCOUNT', key, '-inf', '(' .. ARGV[4])
  local hi = redis.call('ZCOUNT', key, '-inf', ARGV[4])
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    local m = redis.call('ZRANGE', key, mid, mid)[1]
    if before(m, after) or (past and m == after) then lo = mid + 1 else hi = mid end
  end
  return lo
end
local first, last, more
if newest == 0 then
  first = 0
  if after ~= '' then first = rank(true) end
  last = first + limit - 1
  more = redis.call('ZCARD', key) > last + 1
else
  last = redis.call('ZCARD', key) - 1
  if after ~= '' then last = rank(false) - 1 end
  first = math.max(last - limit + 1, 0)
  more = first > 0
end
local got = {}
if last >= first then got = redis.call('ZRANGE', key, first, last, 'WITHSCORES') end
local out = {}
local from, to, step = 1, #got - 1, 2
if newest == 1 then from, to, step = #got - 1, 1, -2 end
for i = from, to, step do
  local id = got[i]
  -- A row of another type (written by hand) answers an error: its attempts read as 0.
  local att = redis.pcall('HGET', base .. 'job:' .. id, 'attempts')
  out[#out + 1] = id
  out[#out + 1] = tonumber(got[i + 1])
  out[#out + 1] = type(att) == 'string' and tonumber(att) or 0
end
if more then return {1, out} end
return {0, out}
