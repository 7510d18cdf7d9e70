-- baton: many acquire/renew, release and read requests in one call, each exactly as its own
-- script would do it (the store wraps acquire.lua, release.lua and read.lua as the functions
-- acquire_op, release_op and read_op before this text; see redis_store.cpp), in order.
--
-- KEYS: the keys of every request, one request after the other.
-- ARGV[1] number of requests; then per request: its kind ('a' acquire, 'r' release, 'q' read,
--         'w' waiters' lapse check),
--         how many keys and arguments it has, and its arguments.
-- Reply: one element per request, in order: that script's reply, or an error reply when that
--        request raised an error (the others still run; like a script alone, what it wrote before
--        the error stays). An owner record ({owner_id, fence, acquired_at, ttl_at, transition_at,
--        now}: acquire, read and lapse check) comes as one string instead, 'fence acquired_at
--        ttl_at transition_at now owner_id' (the owner id last, as it is: it may hold spaces):
--        one reply element per request rather than seven, for the client to parse and free.

-- 'w', the store's lapse check for the waiters of this process (instead of each polling at the
-- end of the lease): the owner record as read_op replies it, and each waiter named in ARGV
-- (id, alive horizon in ms, ...) that is still in the queue stays alive that long from now, as
-- its own poll would keep it (acquire.lua's join), so it keeps its place in line.
-- KEYS: owner, fence, handoff, queue, alive (as acquire.lua)
local function check_op(keys, args)
  local record = read_op({keys[1], keys[2], keys[3]}, {})
  local now = record[6]
  local refreshed = false
  for i = 1, #args, 2 do
    -- Only once half its horizon has passed (a check comes every lease; a write each time
    -- would cost more than the check).
    local horizon = tonumber(args[i + 1])
    local score = tonumber(redis.call('ZSCORE', keys[5], args[i]))
    if score and score < now + horizon / 2 then
      redis.call('ZADD', keys[5], 'XX', 'GT', string.format('%.0f', now + horizon), args[i])
      refreshed = true
    end
  end
  if refreshed then
    -- As join(): an abandoned queue disappears once its last waiter would have expired.
    local last = string.format('%.0f', tonumber(redis.call('ZRANGE', keys[5], -1, -1, 'WITHSCORES')[2]))
    redis.call('PEXPIREAT', keys[4], last)
    redis.call('PEXPIREAT', keys[5], last)
  end
  return record
end

local ops = {a = acquire_op, r = release_op, q = read_op, w = check_op}
local count = tonumber(ARGV[1])
local next_key, next_arg = 1, 2
local out = {}
for i = 1, count do
  local op = ops[ARGV[next_arg]]
  local nkeys, nargs = tonumber(ARGV[next_arg + 1]), tonumber(ARGV[next_arg + 2])
  next_arg = next_arg + 3
  local keys, args = {}, {}
  for j = 1, nkeys do
    keys[j] = KEYS[next_key + j - 1]
  end
  for j = 1, nargs do
    args[j] = ARGV[next_arg + j - 1]
  end
  next_key, next_arg = next_key + nkeys, next_arg + nargs
  if not op then
    out[i] = {err = 'ERR baton batch: unknown request kind'}
  else
    local ok, result = pcall(op, keys, args)
    if ok and type(result) == 'table' and #result == 6 then
      out[i] = string.format('%.0f %.0f %.0f %.0f %.0f ', result[2], result[3], result[4],
                             result[5], result[6]) .. result[1]
    elseif ok then
      out[i] = result
    elseif type(result) == 'table' and result.err then
      out[i] = result
    else
      out[i] = {err = 'ERR ' .. tostring(result)}
    end
  end
end
return out
