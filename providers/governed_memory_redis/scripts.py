"""The Lua scripts that make each store step atomic on the Redis server.

Keys of one tenant share a hash tag, so every script touches one cluster slot. The
entry key of a lookup depends on the revisions the script itself reads, so it is
built inside the script from a prefix passed as an argument; it is in the same slot
(as are the entry keys an erasure builds from its index). ``FILL`` reads the server's
``TIME``, which needs Redis 5 or later (scripts replicate their effects).
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
-- KEYS[1..n]: revision keys; KEYS[n+1]: entry key; KEYS[n+2]: the tenant's entry index
-- ARGV[1]: n; ARGV[2..n+1]: the revisions read before the provider call;
-- ARGV[n+2]: value; ARGV[n+3]: ttl in ms; ARGV[n+4]: the entry's suffix (its index member)
local n = tonumber(ARGV[1])
for i = 1, n do
  if (redis.call('GET', KEYS[i]) or '0') ~= ARGV[i + 1] then
    return 0
  end
end
local ttl = tonumber(ARGV[n + 3])
redis.call('SET', KEYS[n + 1], ARGV[n + 2], 'PX', ttl)
-- The index scores each entry by the server time its TTL ends, so members whose entry
-- has expired are trimmed here, a few at a time, and erasure never scans the keyspace.
local clock = redis.call('TIME')
local now_ms = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
redis.call('ZADD', KEYS[n + 2], now_ms + ttl, ARGV[n + 4])
redis.call('ZREMRANGEBYSCORE', KEYS[n + 2], '-inf', '(' .. now_ms)
if redis.call('PTTL', KEYS[n + 2]) < ttl then
  redis.call('PEXPIRE', KEYS[n + 2], ttl)
end
return 1
"""

ERASE: Final = """
-- KEYS[1]: the tenant's entry index
-- ARGV[1]: entry key prefix (ends with 'e:'); ARGV[2]: how many entries at most
local members = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[2]) - 1)
local removed = 0
for i = 1, #members do
  removed = removed + redis.call('DEL', ARGV[1] .. members[i])
end
if #members > 0 then
  redis.call('ZREM', KEYS[1], unpack(members))
end
return {removed, redis.call('ZCARD', KEYS[1])}
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
