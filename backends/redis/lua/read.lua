-- baton: read a mutex's owner record without contending.
--
-- KEYS[1] owner   KEYS[2] fence   KEYS[3] handoff (as acquire.lua)
-- Reply: {owner_id, fence, acquired_at, ttl_at, transition_at, now}. A free mutex has owner ''
-- and the last fence issued; its transition_at is the end of a pending hand-off, else now - 1.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local o = redis.call('HMGET', KEYS[1], 'id', 'fence', 'acquired_at', 'ttl_at', 'transition_at')
if o[1] then
  return {o[1], tonumber(o[2]) or 0, tonumber(o[3]) or 0, tonumber(o[4]) or 0,
          tonumber(o[5]) or 0, now}
end
local free_until = now - 1
local pttl = redis.call('PTTL', KEYS[3])
if pttl > 0 then
  free_until = now + pttl
end
return {'', tonumber(redis.call('GET', KEYS[2])) or 0, 0, 0, free_until, now}
