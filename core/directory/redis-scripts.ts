/**
 * The directory's atomic steps, as Lua run by Redis. Every script touches keys of one hash tag only, so each runs on
 * one Redis Cluster slot: a SIM's channels share the tag `{s:<sim>}` (the SIM rule of placement reads them together),
 * an application's requests and counts share `{a:<appId>}`.
 *
 * Claim values are `node|epoch|worker`; a node's processes share the prefix `node|epoch|`, so any process of the
 * node that serves a channel may refresh or release its claim.
 */

/** the key of a SIM's channel claims hash ends in 'sim': a sibling channel's key is the same tag with 'ch:<chan>' */
const SIBLING = 'local base = string.sub(KEYS[2], 1, -4)\n';

/**
 * Claims a channel for this node. KEYS: channel, SIM hash. ARGV: my value, ttl ms, chan, my node prefix, a stale
 * node prefix the claim may take the place of ('' for none).
 * Returns {'ok', value} | {'owned', holder} | {'sim', holder}.
 */
export const CLAIM = `${SIBLING}
local cur = redis.call('GET', KEYS[1])
local stale = ARGV[5] ~= '' and ARGV[5] or nil
local function isStale(v) return stale ~= nil and string.sub(v, 1, #stale) == stale end
if cur and string.sub(cur, 1, #ARGV[4]) == ARGV[4] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('HSET', KEYS[2], ARGV[3], cur)
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
  return {'ok', cur}
end
if cur and not isStale(cur) then return {'owned', cur} end
local sims = redis.call('HGETALL', KEYS[2])
for i = 1, #sims, 2 do
  local c, v = sims[i], sims[i + 1]
  if c ~= ARGV[3] and string.sub(v, 1, #ARGV[4]) ~= ARGV[4] then
    if not isStale(v) and redis.call('GET', base .. 'ch:' .. c) == v then return {'sim', v} end
    redis.call('HDEL', KEYS[2], c)
  end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('HSET', KEYS[2], ARGV[3], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return {'ok', ARGV[1]}
`;

/**
 * Refreshes a claim this node holds, naming the worker that serves it (an open may have claimed it from another of
 * the node's workers); puts it back when it expired or Redis lost it (a restart). KEYS: channel, SIM hash. ARGV: my
 * value, ttl ms, chan, my node prefix. Returns 1, or 0 when another node holds it now.
 */
export const REFRESH = `
local cur = redis.call('GET', KEYS[1])
if cur and string.sub(cur, 1, #ARGV[4]) ~= ARGV[4] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('HSET', KEYS[2], ARGV[3], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return 1
`;

/** compare-and-delete. KEYS: channel, SIM hash. ARGV: my node prefix, chan. Returns 1 when it was this node's. */
export const RELEASE = `
local cur = redis.call('GET', KEYS[1])
if cur and string.sub(cur, 1, #ARGV[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('HDEL', KEYS[2], ARGV[2])
  return 1
end
return 0
`;

/** KEYS: channel, SIM hash. ARGV: chan. Returns {owner or '', a live owner of another channel of the SIM or ''}. */
export const LOOKUP = `${SIBLING}
local cur = redis.call('GET', KEYS[1]) or ''
local sims = redis.call('HGETALL', KEYS[2])
for i = 1, #sims, 2 do
  if sims[i] ~= ARGV[1] and redis.call('GET', base .. 'ch:' .. sims[i]) == sims[i + 1] then return {cur, sims[i + 1]} end
end
return {cur, ''}
`;

/**
 * Takes an application's place for a request, under its cap across the fleet. KEYS: count hash (field per process),
 * entry, the node's request set. ARGV: my count field, limit, entry JSON, reqId, keep deadline. Returns 1, 0 at the
 * cap, or 2 when the application has a request of that id already.
 */
export const RESERVE = `
if redis.call('EXISTS', KEYS[2]) == 1 then return 2 end
local n = 0
for _, v in ipairs(redis.call('HVALS', KEYS[1])) do n = n + tonumber(v) end
if n >= tonumber(ARGV[2]) then return 0 end
redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
redis.call('HSET', KEYS[2], 'e', ARGV[3], 'k', ARGV[5])
redis.call('SADD', KEYS[3], ARGV[4])
return 1
`;

/**
 * Removes a request and gives its place back to the count of the process that reserved it (named in the entry).
 * KEYS: count hash, entry, the node's request set; ARGV: reqId. Returns 1 when the entry was there.
 */
export const FORGET = `
local e = redis.call('HGET', KEYS[2], 'e')
if not e then return 0 end
redis.call('DEL', KEYS[2])
redis.call('SREM', KEYS[3], ARGV[1])
local d = cjson.decode(e)
local field = d.nodeId .. '/' .. d.epoch .. '/' .. tostring(d.worker)
if tonumber(redis.call('HGET', KEYS[1], field) or '0') > 0 then redis.call('HINCRBY', KEYS[1], field, -1) end
return 1
`;
