-- baton: give a mutex up (if the caller owns it) and leave its wait queue.
--
-- KEYS: as acquire.lua (owner, fence, queue, alive, handoff).
-- ARGV[1] contender id   ARGV[2] handoff window (ms)   ARGV[3] wake channel prefix
-- ARGV[4] events channel
-- Reply: 1 when the caller owned the mutex and released it, else 0.
--
-- The fence counter is kept. A released mutex (or an offer the caller gives back by leaving) is
-- offered to the longest live waiter: it is named in the handoff key for the window and woken on
-- its own channel; nobody else may take the mutex meanwhile.
local owner_key, queue_key, alive_key, handoff_key = KEYS[1], KEYS[3], KEYS[4], KEYS[5]
local id = ARGV[1]
local window = ARGV[2]
local wake_prefix = ARGV[3]
local events = ARGV[4]

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local released = 0
local pass_on = false
if redis.call('HGET', owner_key, 'id') == id then
  redis.call('DEL', owner_key)
  redis.call('PUBLISH', events, 'released ' .. id)
  released = 1
  pass_on = true
end
redis.call('ZREM', queue_key, id)
redis.call('ZREM', alive_key, id)
if redis.call('GET', handoff_key) == id then
  redis.call('DEL', handoff_key)
  pass_on = true
end

if pass_on and redis.call('EXISTS', owner_key) == 0 and redis.call('EXISTS', handoff_key) == 0 then
  local dead = redis.call('ZRANGEBYSCORE', alive_key, '-inf', '(' .. string.format('%.0f', now))
  for _, d in ipairs(dead) do
    redis.call('ZREM', queue_key, d)
    redis.call('ZREM', alive_key, d)
  end
  local head = redis.call('ZRANGE', queue_key, 0, 0)[1]
  if head then
    redis.call('ZREM', queue_key, head)
    redis.call('ZREM', alive_key, head)
    redis.call('SET', handoff_key, head, 'PX', window)
    redis.call('PUBLISH', wake_prefix .. head, 'wake')
  end
end
return released
