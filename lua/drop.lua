-- drop: delete a whole queue, a batch of keys at a time: its jobs in every set, their rows,
-- failure histories, results and idempotency guards, its meta, lanes, periodic schedules and
-- workers' stats. Every key of the grammar's queue forms (emq:{<q>}:<type>...) goes.
--
-- Each call walks one SCAN step over the queue's keys (MATCH on the queue's hash tag, which
-- Valkey 8 confines to the queue's slot on a cluster) and deletes what it finds; the walk ends
-- when the returned cursor is "0". A queue whose active set holds jobs (claimed, running
-- somewhere: their outcomes would answer EMQSTALE no row) is refused at the walk's start
-- unless force is 1. Keys written while the walk runs (an enqueue, a worker's report) may
-- survive it: a queue is dropped once its producers and workers have stopped. The queue
-- registry (emq:queues, outside the tag) is the caller's: the Go bus removes the name when
-- the walk ends.
--
-- KEYS[1]  emq:{<q>}:active             scored by lease deadline; read at the walk's start
-- ARGV[1]  cursor  cursor                "0" to start, then what the last call returned
-- ARGV[2]  limit   uint[1,10000]         SCAN's COUNT per call. The Go bus passes 1000
-- ARGV[3]  force   uint[0,1]             1: drop a queue whose active set holds jobs too
-- ARGV[4]  server  bytes[40,40]          optional: the server of the cursor, as the call that
--          returned it replied (40 bytes of [0-9a-f]). A cursor is a place in one server
--          process's table: when server is not this server's run_id (a restart, a failover, a
--          slot moved), the walk starts again from "0", and the busy check with it
-- DERIVES  emq:{<q>}:pending             found by the walk, as every key below: KEYS[1] up to its
--          type, then the rest of the name found
-- DERIVES  emq:{<q>}:schedule            found by the walk
-- DERIVES  emq:{<q>}:dead                found by the walk
-- DERIVES  emq:{<q>}:meta                found by the walk
-- DERIVES  emq:{<q>}:wake                found by the walk
-- DERIVES  emq:{<q>}:job:<id>            found by the walk
-- DERIVES  emq:{<q>}:uniq:<key>          found by the walk
-- DERIVES  emq:{<q>}:periodic:<name>     found by the walk
-- DERIVES  emq:{<q>}:periodics           found by the walk
-- DERIVES  emq:{<q>}:errors:<id>         found by the walk
-- DERIVES  emq:{<q>}:result:<id>         found by the walk
-- DERIVES  emq:{<q>}:workers             found by the walk
-- DERIVES  emq:{<q>}:flow                found by the walk
-- DERIVES  emq:{<q>}:lanes               found by the walk
-- DERIVES  emq:{<q>}:laneactive          found by the walk
-- DERIVES  emq:{<q>}:laneready           found by the walk
-- DERIVES  emq:{<q>}:lanewait            found by the walk
-- DERIVES  emq:{<q>}:joblane             found by the walk
-- DERIVES  emq:{<q>}:urgent              found by the walk
-- DERIVES  emq:{<q>}:flowlog             found by the walk
-- DERIVES  emq:{<q>}:lanepending:<lane>  found by the walk
-- DERIVES  emq:{<q>}:lanelog:<lane>      found by the walk
-- REPLY    {cursor, deleted, server}: cursor "0" when the walk ended; deleted counts this
--          call's keys; server is this server's run_id (INFO server), which a later call that
--          resumes the walk passes back as ARGV[4]
-- ERROR    EMQBUSY    <n> jobs are claimed: active holds n jobs at the walk's start and force
--          is 0 (nothing written)
-- ERROR    EMQKEYS    KEYS[1] is not a queue's active set
-- ERROR    EMQARGS    an ARGV does not meet its rule, or the count of ARGV is not 3 or 4
-- ERROR    EMQTYPE    the active set holds another type (nothing written)
local base = string.match(KEYS[1] or '', '^(emq:{[0-9A-Za-z_.%-]+}:)active$')
if #KEYS ~= 1 or not base or #base > 71 then return redis.error_reply('EMQKEYS expected emq:{<q>}:active') end
if #ARGV ~= 3 and #ARGV ~= 4 then return redis.error_reply('EMQARGS expected 3 or 4 ARGV: cursor, limit, force, server') end
local cursor, limit, force, from = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
if #cursor > 20 or not string.match(cursor, '^[0-9]+$') or #cursor == 20 and cursor > '18446744073709551615' then
  return redis.error_reply('EMQARGS cursor must be a decimal in [0, 18446744073709551615]')
end
if #limit > 5 or not string.match(limit, '^[0-9]+$') or tonumber(limit) < 1 or tonumber(limit) > 10000 then
  return redis.error_reply('EMQARGS limit must be an integer in [1, 10000]')
end
if #force > 15 or not string.match(force, '^[0-9]+$') or tonumber(force) > 1 then
  return redis.error_reply('EMQARGS force must be an integer in [0, 1]')
end
if from and not (#from == 40 and string.match(from, '^[0-9a-f]+$')) then
  return redis.error_reply('EMQARGS server must be 40 bytes of [0-9a-f]')
end
-- A SCAN cursor is a place in one server process's table: from another process (a restart, a
-- failover, a slot moved) it would skip keys, so the walk starts again.
local server = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)') or ''
if from and from ~= server then cursor = '0' end
if cursor == '0' then
  local kind = redis.call('TYPE', KEYS[1])['ok']
  if kind ~= 'none' and kind ~= 'zset' then
    return redis.error_reply('EMQTYPE ' .. KEYS[1] .. ' holds a ' .. kind .. ', not a zset')
  end
  local claimed = redis.call('ZCARD', KEYS[1])
  if claimed > 0 and tonumber(force) == 0 then
    return redis.error_reply('EMQBUSY ' .. claimed .. ' jobs are claimed')
  end
end
local res = redis.call('SCAN', cursor, 'MATCH', base .. '*', 'COUNT', limit)
local deleted = 0
for _, k in ipairs(res[2]) do
  if string.sub(k, 1, #base) == base then
    deleted = deleted + redis.call('DEL', base .. string.sub(k, #base + 1))
  end
end
return {res[1], deleted, server}
