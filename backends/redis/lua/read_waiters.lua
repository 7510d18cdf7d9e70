-- baton: the contenders waiting for a mutex, first in line first.
--
-- KEYS[1] queue   KEYS[2] alive   KEYS[3] handoff (as acquire.lua)
-- Reply: an array of contender ids: the waiter a freed mutex is reserved for (if any), then the
-- queue in order, without waiters whose alive entry has expired (they would be purged).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {}
local reserved = redis.call('GET', KEYS[3])
if reserved and reserved ~= '' then
  out[#out + 1] = reserved
end
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local until_ms = tonumber(redis.call('ZSCORE', KEYS[2], id))
  if id ~= reserved and until_ms and until_ms >= now then
    out[#out + 1] = id
  end
end
return out
