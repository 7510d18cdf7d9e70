-- baton: compare-and-set the controls record of a mutex and tell the watchers.
--
-- KEYS[1] controls   hash {version, bytes}; missing = never written (version 0)
-- ARGV[1] the version the caller read (decimal)   ARGV[2] the new bytes
-- ARGV[3] the controls channel (a message with the new version is published on it)
-- Reply: {1, new version, bytes} when written, else {0, current version, current bytes}.
local c = redis.call('HMGET', KEYS[1], 'version', 'bytes')
local version = tonumber(c[1]) or 0
if version ~= tonumber(ARGV[1]) then
  return {0, version, c[2] or ''}
end
version = version + 1
local text = string.format('%.0f', version)
redis.call('HSET', KEYS[1], 'version', text, 'bytes', ARGV[2])
redis.call('PUBLISH', ARGV[3], text)
return {1, version, ARGV[2]}
