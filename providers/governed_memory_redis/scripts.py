"""The Lua scripts that make each store step atomic on the Redis server.

Keys of one tenant share a hash tag, so every script touches one cluster slot. The
entry key of a lookup depends on the revisions the script itself reads, so it is
built inside the script from a prefix passed as an argument; it is in the same slot.
"""

from __future__ import annotations

from typing import Final

LOOKUP: Final = """
-- KEYS[1..n]: revision keys; KEYS[n+1..2n]: expiry-mark keys
-- ARGV[1]: n; ARGV[2]: entry key prefix (ends with the digest and ':'); ARGV[3]: now
local n = tonumber(ARGV[1])
local revisions = {}
for i = 1, n do
  revisions[i] = redis.call('GET', KEYS[i]) or '0'
end
local horizon = false
for i = n + 1, 2 * n do
  local mark = redis.call('ZRANGEBYSCORE', KEYS[i], '(' .. ARGV[3], '+inf',
                          'WITHSCORES', 'LIMIT', 0, 1)
  if mark[2] and ((not horizon) or tonumber(mark[2]) < tonumber(horizon)) then
    horizon = mark[2]
  end
end
local value = redis.call('GET', ARGV[2] .. table.concat(revisions, '.'))
return {revisions, horizon, value}
"""

FILL: Final = """
-- KEYS[1..n]: revision keys; KEYS[n+1]: entry key
-- ARGV[1]: n; ARGV[2..n+1]: the revisions read before the provider call;
-- ARGV[n+2]: value; ARGV[n+3]: ttl in ms
local n = tonumber(ARGV[1])
for i = 1, n do
  if (redis.call('GET', KEYS[i]) or '0') ~= ARGV[i + 1] then
    return 0
  end
end
redis.call('SET', KEYS[n + 1], ARGV[n + 2], 'PX', ARGV[n + 3])
return 1
"""

BUMP: Final = """
-- KEYS[1..n]: revision keys; KEYS[n+1..2n]: expiry-mark keys
-- ARGV[1]: n; ARGV[2]: now; ARGV[3]: mark grace in s; ARGV[4..]: expiry instants
local n = tonumber(ARGV[1])
local now = tonumber(ARGV[2])
local grace = tonumber(ARGV[3])
for i = 1, n do
  redis.call('INCR', KEYS[i])
end
if #ARGV > 3 then
  for i = n + 1, 2 * n do
    for j = 4, #ARGV do
      redis.call('ZADD', KEYS[i], ARGV[j], ARGV[j])
    end
    redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', '(' .. tostring(now - grace))
    local last = redis.call('ZRANGE', KEYS[i], -1, -1, 'WITHSCORES')
    if last[2] then
      local ttl = math.ceil((tonumber(last[2]) - now + grace) * 1000)
      local current = redis.call('PTTL', KEYS[i])
      if current < ttl then
        redis.call('PEXPIRE', KEYS[i], ttl)
      end
    end
  end
end
return 1
"""
