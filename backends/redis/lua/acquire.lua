-- baton: acquire or renew a mutex (one atomic step; times from the server's clock).
--
-- KEYS[1] owner    hash {id, fence, acquired_at, ttl_at, transition_at}, expires at transition_at
-- KEYS[2] fence    counter; never deleted by baton; seeded from TIME in microseconds when missing
-- KEYS[3] queue    zset contender -> first-join time (us): the FIFO wait queue
-- KEYS[4] alive    zset contender -> expiry (ms): waiters that stop polling fall out of the queue
-- KEYS[5] handoff  string: the waiter a just-freed mutex is reserved for, expires after the window
-- ARGV[1] contender id   ARGV[2] ttl (ms)   ARGV[3] transition (ms)   ARGV[4] handoff window (ms)
-- ARGV[5] wake channel prefix (+ contender id)   ARGV[6] events channel
-- ARGV[7] end (server ms) of the lease the caller saw last, or 0
-- ARGV[8] '1' when that lease was the caller's own
-- ARGV[9] the highest fence the caller saw (decimal), or 0
-- ARGV[10] '1' when the caller's last release failed (the key may still name it): taking the
--          mutex is a new ownership with a new fence, never a renewal
-- ARGV[11] '1' when the caller may be on a master it did not use before (sentinel mode: the
--          first acquire of each mutex after every connect): the counter is first raised to at
--          least the server's TIME in microseconds, since a failover may have lost the last
--          INCRs of the old master (asynchronous replication)
--
-- Reply: {owner_id, fence, acquired_at, ttl_at, transition_at, now}; owner_id '' when free.
--
-- The caller takes the mutex when nobody owns it (the owner key expired or was deleted) and
-- it is not reserved for another waiter; it renews when it owns it (the key exists, so the lease
-- is live). A free mutex with waiters goes to the longest waiter: if the caller is not the head
-- of the queue, the head is offered the mutex (removed from the queue, named in the handoff key,
-- woken on its own channel) and the caller waits in line. A head that does not take its offer
-- within the window has lost its place and joins the queue again at the tail.
--
-- A missing fence counter means first use or lost data (a restart without persistence,
-- FLUSHALL). Then the counter is seeded above every fence issued before (TIME in microseconds,
-- or the highest fence the caller saw). While a lease the caller saw may still run, that lease
-- decides: its owner takes the mutex back at its next renewal (with a new fence), and everybody
-- else waits until it would have ended, so the mutex is never shared with a waiter.
local owner_key, fence_key, queue_key, alive_key, handoff_key =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local id = ARGV[1]
local ttl = tonumber(ARGV[2])
local transition = tonumber(ARGV[3])
local window = ARGV[4]
local wake_prefix = ARGV[5]
local events = ARGV[6]
local seen_until = tonumber(ARGV[7]) or 0
local seen_own = ARGV[8] == '1'
local min_fence = ARGV[9]
local fresh = ARGV[10] == '1'
local reseed = ARGV[11] == '1'

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local now_us = t[1] .. string.format('%06d', tonumber(t[2]))

-- Re-seed after a possible failover. The counter starts at TIME in microseconds and INCR adds
-- one per ownership, so while fewer than a million owners a second were issued, every fence the
-- old master handed out is below its clock, and so below the new master's (same time source).
if reseed then
  local counter = tonumber(redis.call('GET', fence_key) or '')
  if counter and counter < tonumber(now_us) then
    redis.call('SET', fence_key, now_us)
  end
end

-- Integers as decimal strings (tostring() would print 1.7e+12).
local function int(n)
  return string.format('%.0f', n)
end

local function record()
  local o = redis.call('HMGET', owner_key, 'id', 'fence', 'acquired_at', 'ttl_at', 'transition_at')
  return {o[1] or '', tonumber(o[2]) or 0, tonumber(o[3]) or 0, tonumber(o[4]) or 0,
          tonumber(o[5]) or 0, now}
end

local function free_record(until_ms)
  return {'', tonumber(redis.call('GET', fence_key)) or 0, 0, 0, until_ms, now}
end

local function join()
  redis.call('ZADD', queue_key, 'NX', now_us, id)
  redis.call('ZADD', alive_key, int(now + 2 * (ttl + transition) + 1000), id)
  -- An abandoned queue disappears once its last waiter would have expired.
  local last = redis.call('ZRANGE', alive_key, -1, -1, 'WITHSCORES')[2]
  redis.call('PEXPIREAT', queue_key, int(tonumber(last)))
  redis.call('PEXPIREAT', alive_key, int(tonumber(last)))
end

local function purge()
  local dead = redis.call('ZRANGEBYSCORE', alive_key, '-inf', '(' .. int(now))
  for _, d in ipairs(dead) do
    redis.call('ZREM', queue_key, d)
    redis.call('ZREM', alive_key, d)
  end
end

local function offer(head)
  redis.call('ZREM', queue_key, head)
  redis.call('ZREM', alive_key, head)
  redis.call('SET', handoff_key, head, 'PX', window)
  redis.call('PUBLISH', wake_prefix .. head, 'wake')
end

local owner = redis.call('HGET', owner_key, 'id')
if owner == id and not fresh then
  local ttl_at = now + ttl
  local transition_at = ttl_at + transition
  redis.call('HSET', owner_key, 'ttl_at', int(ttl_at), 'transition_at', int(transition_at))
  redis.call('PEXPIREAT', owner_key, int(transition_at))
  return record()
end
if owner and owner ~= id then
  join()
  return record()
end

local counter_lost = redis.call('EXISTS', fence_key) == 0
if not owner and counter_lost and (tonumber(min_fence) or 0) > 0 and
    not (seen_own and seen_until > now) then
  -- The caller knew this mutex, so its counter is gone because Redis lost its data. Whoever
  -- owned it may still act on its local lease, and this caller may not know who that is: hold
  -- the mutex for nobody (an empty handoff) for one full lease, so every such lease has ended
  -- before anybody takes it. The counter restarts above every fence issued before.
  local seed = now_us
  if (tonumber(min_fence) or 0) > tonumber(now_us) then
    seed = min_fence
  end
  redis.call('SET', fence_key, seed)
  redis.call('SET', handoff_key, '', 'PX', int(ttl + transition))
  join()
  return free_record(now + ttl + transition)
end
if not owner then
  local reclaim = counter_lost and seen_until > now
  if reclaim and not seen_own then
    join()
    return {'', 0, 0, 0, seen_until, now}
  end
  if not reclaim then
    local handoff = redis.call('GET', handoff_key)
    -- During a lost-data hold (empty handoff) only the caller whose own lease is live may take
    -- the mutex back.
    local owner_back = handoff == '' and seen_own and seen_until > now
    if handoff and handoff ~= id and not owner_back then
      join()
      return free_record(now + math.max(redis.call('PTTL', handoff_key), 0))
    end
    if not handoff and not owner_back then
      purge()
      local head = redis.call('ZRANGE', queue_key, 0, 0)[1]
      if head and head ~= id then
        offer(head)
        join()
        return free_record(now + tonumber(window))
      end
    end
  end
end

-- A new ownership: the next fence (a lost counter restarts above every fence issued before).
redis.call('DEL', handoff_key)
redis.call('ZREM', queue_key, id)
redis.call('ZREM', alive_key, id)
if counter_lost then
  local seed = now_us
  if (tonumber(min_fence) or 0) > tonumber(now_us) then
    seed = min_fence
  end
  redis.call('SET', fence_key, seed)
end
local fence = redis.call('INCR', fence_key)
local ttl_at = now + ttl
local transition_at = ttl_at + transition
redis.call('HSET', owner_key, 'id', id, 'fence', int(fence), 'acquired_at', int(now),
           'ttl_at', int(ttl_at), 'transition_at', int(transition_at))
redis.call('PEXPIREAT', owner_key, int(transition_at))
redis.call('PUBLISH', events, 'acquired ' .. int(fence) .. ' ' .. id)
return record()
