-- baton: write the lease-guarded state, only for the current owner with the current fence.
--
-- KEYS[1] owner (as acquire.lua; it exists only while the lease is live)   KEYS[2] state
-- ARGV[1] contender id   ARGV[2] fence (decimal)   ARGV[3] the bytes
-- Reply: 1, or the error NOT_OWNER.
local o = redis.call('HMGET', KEYS[1], 'id', 'fence')
if o[1] ~= ARGV[1] or o[2] ~= ARGV[2] then
  return redis.error_reply('NOT_OWNER the mutex has another owner or fence')
end
redis.call('SET', KEYS[2], ARGV[3])
return 1
