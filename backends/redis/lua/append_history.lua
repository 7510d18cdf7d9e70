-- baton: append one history entry, only for the current owner with its fence, and prune.
--
-- KEYS[1] owner (as acquire.lua; it exists only while the lease is live)
-- KEYS[2] history   list, newest first; each entry '<seq> <fence> <bytes>'
-- KEYS[3] history:seq   counter giving seq (never reused: pruning does not touch it)
-- ARGV[1] contender id   ARGV[2] fence (decimal)   ARGV[3] the bytes   ARGV[4] keep (>= 1)
-- Reply: the entry's seq, or the error NOT_OWNER (nothing written).
local o = redis.call('HMGET', KEYS[1], 'id', 'fence')
if o[1] ~= ARGV[1] or o[2] ~= ARGV[2] then
  return redis.error_reply('NOT_OWNER the mutex has another owner or fence')
end
local seq = redis.call('INCR', KEYS[3])
redis.call('LPUSH', KEYS[2], string.format('%.0f', seq) .. ' ' .. ARGV[2] .. ' ' .. ARGV[3])
redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[4]) - 1)
return seq
