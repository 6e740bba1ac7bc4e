"""The Lua scripts `RedisStore` runs on the server: each one store operation, atomic, one round trip.

Every script takes the time as its first argument: a number from the
store's `clock`, or -1 for the Redis server's own clock (`TIME`), which
every worker on every machine then shares.
"""

from __future__ import annotations

NOW = """
local function now_from(arg)
  local now = tonumber(arg)
  if now < 0 then
    local t = redis.call('TIME')
    now = tonumber(t[1]) + tonumber(t[2]) / 1000000
  end
  return now
end
"""

# The run at `run_key` in the index of every run (`index`) and in its tenant's, by its last update: `index`
# .. '-of:' .. tenant, or `index` .. '-of-none' for a run without one (kept before stores knew tenants too);
# RedisStore._tenant_index names the same keys.
INDEXED = """
local function tenant_index(index, tenant)
  if tenant and tenant ~= '' then return index .. '-of:' .. tenant end
  return index .. '-of-none'
end
local function index_run(index, run_key, run_id, now)
  redis.call('ZADD', index, now, run_id)
  redis.call('ZADD', tenant_index(index, redis.call('HGET', run_key, 'tenant')), now, run_id)
end
"""

# KEYS: run, journal, index. ARGV: now, run_id, agent, owner, lease, session ('' for none), tenant ('' for none),
# entries...
START_RUN = (
    NOW
    + INDEXED
    + """
local now = now_from(ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 1 then return 'exists' end
redis.call('HSET', KEYS[1], 'agent', ARGV[3], 'status', 'running', 'created', tostring(now), 'updated', tostring(now),
  'owner', ARGV[4], 'lease_expires', tostring(now + tonumber(ARGV[5])), 'session', ARGV[6], 'pending', '0',
  'tenant', ARGV[7])
if #ARGV > 7 then redis.call('RPUSH', KEYS[2], unpack(ARGV, 8)) end
index_run(KEYS[3], KEYS[1], ARGV[2], now)
return 'ok'
"""
)

# KEYS: run, journal, index. ARGV: run_id. Forgets the run, its journal and its place in both indexes.
DELETE_RUN = (
    INDEXED
    + """
redis.call('ZREM', tenant_index(KEYS[3], redis.call('HGET', KEYS[1], 'tenant')), ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('DEL', KEYS[1], KEYS[2])
return 1
"""
)

# KEYS: index, the index of runs without a tenant, its marker. ARGV: the prefix of run keys.
# Once per namespace: puts the runs an older onion kept (no index of their tenant) in the index of runs without
# one; a namespace whose index the marker says is whole, or that has no run yet, is left as it is.
INDEX_UNTENANTED = """
if redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
local runs = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
for i = 1, #runs, 2 do
  local tenant = redis.call('HGET', ARGV[1] .. runs[i], 'tenant')
  if not tenant or tenant == '' then redis.call('ZADD', KEYS[2], runs[i + 1], runs[i]) end
end
redis.call('SET', KEYS[3], '1')
return 1
"""

# KEYS: run, index. ARGV: now, run_id, owner, lease, paused_only ('1' or '0').
# Returns {verdict, now, record fields...}: verdict 'ok' (claimed), 'busy' or 'missing'.
CLAIM_RUN = (
    NOW
    + INDEXED
    + """
local now = now_from(ARGV[1])
local fields = redis.call('HGETALL', KEYS[1])
if #fields == 0 then return {'missing', tostring(now)} end
local record = {}
for i = 1, #fields, 2 do record[fields[i]] = fields[i + 1] end
local status, paused_only = record['status'], ARGV[5] == '1'
local free = status == 'paused' or (status == 'failed' and not paused_only)
  or (status == 'running' and not paused_only and tonumber(record['lease_expires'] or '0') <= now)
if free then
  local expires = tostring(now + tonumber(ARGV[4]))
  redis.call('HSET', KEYS[1], 'status', 'running', 'owner', ARGV[3], 'lease_expires', expires, 'updated', tostring(now))
  index_run(KEYS[2], KEYS[1], ARGV[2], now)
  fields = redis.call('HGETALL', KEYS[1])
end
local reply = {free and 'ok' or 'busy', tostring(now)}
for _, field in ipairs(fields) do table.insert(reply, field) end
return reply
"""
)

# Why the worker `owner` cannot write to the run at `run_key`: nil when it holds the run, else
# 'missing' or the status of a run it lost.
LOST = """
local function lost(run_key, owner)
  if redis.call('HGET', run_key, 'owner') == owner then return nil end
  if redis.call('EXISTS', run_key) == 0 then return 'missing' end
  return redis.call('HGET', run_key, 'status')
end
"""

# KEYS: run, journal, index. ARGV: now, run_id, owner, op ('append', 'renew' or 'release'),
# lease, status, state ('' for none), pending, entries...
# Returns 'ok', 'missing', or the status of a run `owner` lost.
HOLD_RUN = (
    NOW
    + LOST
    + INDEXED
    + """
local now = now_from(ARGV[1])
local refusal = lost(KEYS[1], ARGV[3])
if refusal then return refusal end
local op = ARGV[4]
if op == 'renew' then
  redis.call('HSET', KEYS[1], 'lease_expires', tostring(now + tonumber(ARGV[5])))
  return 'ok'
end
if #ARGV > 8 then redis.call('RPUSH', KEYS[2], unpack(ARGV, 9)) end
if op == 'append' then
  redis.call('HSET', KEYS[1], 'lease_expires', tostring(now + tonumber(ARGV[5])), 'updated', tostring(now))
else
  redis.call('HSET', KEYS[1], 'status', ARGV[6], 'state', ARGV[7], 'pending', ARGV[8], 'updated', tostring(now))
  redis.call('HDEL', KEYS[1], 'owner', 'lease_expires')
end
index_run(KEYS[3], KEYS[1], ARGV[2], now)
return 'ok'
"""
)

# A run's release with its session turn, both or neither.
# KEYS: run, journal, index, session, session lock. ARGV: now, run_id, owner, status, state ('' for none),
# pending, session lock token, number of entries, entries..., turn messages...
# Returns what HOLD_RUN does, or 'session-lost' when the token no longer holds the session's lock.
RELEASE_WITH_TURN = (
    NOW
    + LOST
    + INDEXED
    + """
local now = now_from(ARGV[1])
local refusal = lost(KEYS[1], ARGV[3])
if refusal then return refusal end
if redis.call('HGET', KEYS[5], 'owner') ~= ARGV[7] then return 'session-lost' end
local entries = tonumber(ARGV[8])
if entries > 0 then redis.call('RPUSH', KEYS[2], unpack(ARGV, 9, 8 + entries)) end
if #ARGV > 8 + entries then redis.call('RPUSH', KEYS[4], unpack(ARGV, 9 + entries)) end
redis.call('HSET', KEYS[1], 'status', ARGV[4], 'state', ARGV[5], 'pending', ARGV[6], 'updated', tostring(now))
redis.call('HDEL', KEYS[1], 'owner', 'lease_expires')
index_run(KEYS[3], KEYS[1], ARGV[2], now)
return 'ok'
"""
)

# KEYS: lock. ARGV: now, owner, lease, renew ('1': only extend a lock `owner` holds), the prefix of run keys.
# Returns 1 when `owner` holds the lock now. A lapsed lock held by a run still running (its worker died,
# it waits to be recovered) is not handed on; Redis forgets a lock a day after it lapsed.
LOCK = (
    NOW
    + """
local now = now_from(ARGV[1])
local holder = redis.call('HMGET', KEYS[1], 'owner', 'expires')
if ARGV[4] == '1' and holder[1] ~= ARGV[2] then return 0 end
if holder[1] and holder[1] ~= ARGV[2] then
  if tonumber(holder[2]) > now then return 0 end
  if redis.call('HGET', ARGV[5] .. holder[1], 'status') == 'running' then return 0 end
end
redis.call('HSET', KEYS[1], 'owner', ARGV[2], 'expires', tostring(now + tonumber(ARGV[3])))
redis.call('PEXPIRE', KEYS[1], math.ceil((tonumber(ARGV[3]) + 86400) * 1000))
return 1
"""
)

# KEYS: session, lock. ARGV: lock token ('' for none), messages...
# Returns 0, appending nothing, when the token does not hold the session's lock; else 1.
SESSION_APPEND = """
if ARGV[1] ~= '' and redis.call('HGET', KEYS[2], 'owner') ~= ARGV[1] then return 0 end
if #ARGV > 1 then redis.call('RPUSH', KEYS[1], unpack(ARGV, 2)) end
return 1
"""

# KEYS: the session's tenant, its messages. ARGV: the tenant to record ('' for none).
# Returns the session's tenant ('' for none): the one on record, else ARGV[1] (none when it has messages already).
CLAIM_SESSION = """
local kept = redis.call('GET', KEYS[1])
if kept then return kept end
kept = ARGV[1]
if redis.call('EXISTS', KEYS[2]) == 1 then kept = '' end
redis.call('SET', KEYS[1], kept)
return kept
"""

# KEYS: lock. ARGV: owner.
UNLOCK = """
if redis.call('HGET', KEYS[1], 'owner') == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
"""

# The rate log of one key: a sorted set of the requests admitted within the window (score: when;
# member: '<id>:<tokens>'), and a hash with the tokens they hold and the time a pause ends.
RATE = (
    NOW
    + """
local function cost(member) return tonumber(string.match(member, ':(%-?[%d.]+)$')) end
local function forget_old(log, meta, now, window)
  local total = tonumber(redis.call('HGET', meta, 'tokens') or '0')
  local old = redis.call('ZRANGEBYSCORE', log, '-inf', now - window)
  if #old > 0 then
    for _, member in ipairs(old) do total = total - cost(member) end
    redis.call('ZREMRANGEBYSCORE', log, '-inf', now - window)
  end
  return total
end
local function window_of(meta) return tonumber(redis.call('HGET', meta, 'window') or '60') end
local function keep_for(log, meta, now, window)
  local paused = tonumber(redis.call('HGET', meta, 'paused') or '0')
  local ttl = math.ceil((window + math.max(0, paused - now)) * 1000) + 1000
  redis.call('PEXPIRE', log, ttl)
  redis.call('PEXPIRE', meta, ttl)
end
"""
)

# KEYS: log, meta. ARGV: now, member id, tokens, rpm (0: none), tpm (0: none), window.
# Returns {wait, now}: wait 0 means one request and `tokens` were reserved under '<id>:<tokens>'.
ACQUIRE = (
    RATE
    + """
local now, tokens = now_from(ARGV[1]), tonumber(ARGV[3])
local rpm, tpm, window = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
redis.call('HSET', KEYS[2], 'window', ARGV[6])
local total = forget_old(KEYS[1], KEYS[2], now, window)
local wait = tonumber(redis.call('HGET', KEYS[2], 'paused') or '0') - now
if rpm > 0 then
  local count = redis.call('ZCARD', KEYS[1])
  if count >= rpm then
    local leaving = redis.call('ZRANGE', KEYS[1], count - rpm, count - rpm, 'WITHSCORES')
    wait = math.max(wait, tonumber(leaving[2]) + window - now)
  end
end
if tpm > 0 and total + tokens > tpm then
  local need, freed = total + tokens - tpm, 0
  local entries = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
  for i = 1, #entries, 2 do
    freed = freed + cost(entries[i])
    if freed >= need then
      wait = math.max(wait, tonumber(entries[i + 1]) + window - now)
      break
    end
  end
end
redis.call('HSET', KEYS[2], 'tokens', tostring(total))
if wait <= 0 then
  redis.call('ZADD', KEYS[1], now, ARGV[2] .. ':' .. ARGV[3])
  redis.call('HSET', KEYS[2], 'tokens', tostring(total + tokens))
  wait = 0
end
keep_for(KEYS[1], KEYS[2], now, window)
return {tostring(wait), tostring(now)}
"""
)

# KEYS: log, meta. ARGV: now, member, tokens used, refund_request ('1' or '0').
RECONCILE = (
    RATE
    + """
local now, window = now_from(ARGV[1]), window_of(KEYS[2])
local total = forget_old(KEYS[1], KEYS[2], now, window)
local when = redis.call('ZSCORE', KEYS[1], ARGV[2])
if when then
  redis.call('ZREM', KEYS[1], ARGV[2])
  total = total - cost(ARGV[2])
  if ARGV[4] ~= '1' then
    local id = string.match(ARGV[2], '^(.*):')
    redis.call('ZADD', KEYS[1], when, id .. ':' .. ARGV[3])
    total = total + tonumber(ARGV[3])
  end
end
-- written even when the reservation had left the window: forget_old removed what left with it
redis.call('HSET', KEYS[2], 'tokens', tostring(total))
keep_for(KEYS[1], KEYS[2], now, window)
return 1
"""
)

# KEYS: log, meta. ARGV: now, seconds.
PAUSE = (
    RATE
    + """
local now, window = now_from(ARGV[1]), window_of(KEYS[2])
local paused = tonumber(redis.call('HGET', KEYS[2], 'paused') or '0')
redis.call('HSET', KEYS[2], 'paused', tostring(math.max(paused, now + tonumber(ARGV[2]))))
keep_for(KEYS[1], KEYS[2], now, window)
return 1
"""
)

# KEYS: slots. ARGV: now, owner, limit, lease. Returns 1 when `owner` holds (or renewed) a slot.
TAKE_SLOT = (
    NOW
    + """
local now = now_from(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local expires = now + tonumber(ARGV[4])
if redis.call('ZSCORE', KEYS[1], ARGV[2]) or redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[3]) then
  redis.call('ZADD', KEYS[1], expires, ARGV[2])
  redis.call('PEXPIRE', KEYS[1], math.ceil(tonumber(ARGV[4]) * 1000) + 1000)
  return 1
end
return 0
"""
)

# KEYS: a key's spending totals (a hash: cost, tokens), its buckets (a list of "start cost tokens", oldest first).
# ARGV: now, cost, tokens, window (0: none), ttl (0: none). Adds to the totals, forgetting the buckets that left a
# rolling window (`onion.stores._spending.Spent.add` does the same); returns the totals as text (a Lua number would
# be cut to an integer).
SPEND = (
    NOW
    + """
local now, cost, tokens = now_from(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local window, ttl = tonumber(ARGV[4]), tonumber(ARGV[5])
local function text(x) return string.format('%.17g', x) end
local function bucket(entry)
  local start, c, t = string.match(entry, '^(%S+) (%S+) (%S+)$')
  return start, tonumber(c), tonumber(t)
end
local total_cost = tonumber(redis.call('HGET', KEYS[1], 'cost') or '0')
local total_tokens = tonumber(redis.call('HGET', KEYS[1], 'tokens') or '0')
local changed = cost ~= 0 or tokens ~= 0
if window > 0 then
  local step = window / 100
  while true do
    local head = redis.call('LINDEX', KEYS[2], 0)
    if not head then break end
    local start, c, t = bucket(head)
    if tonumber(start) + step > now - window then break end
    redis.call('LPOP', KEYS[2])
    total_cost, total_tokens, changed = total_cost - c, total_tokens - t, true
  end
  if redis.call('LLEN', KEYS[2]) == 0 then total_cost, total_tokens = 0, 0 end
  if cost ~= 0 or tokens ~= 0 then
    local start = math.floor(now / step) * step
    local tail = redis.call('LINDEX', KEYS[2], -1)
    local last, c, t
    if tail then last, c, t = bucket(tail) end
    if tail and tonumber(last) >= start then
      redis.call('LSET', KEYS[2], -1, last .. ' ' .. text(c + cost) .. ' ' .. text(t + tokens))
    else
      redis.call('RPUSH', KEYS[2], text(start) .. ' ' .. text(cost) .. ' ' .. text(tokens))
    end
  end
  ttl = window + step
end
total_cost, total_tokens = total_cost + cost, total_tokens + tokens
if changed then
  redis.call('HSET', KEYS[1], 'cost', text(total_cost), 'tokens', text(total_tokens))
  if ttl > 0 then
    redis.call('PEXPIRE', KEYS[1], math.ceil(ttl * 1000))
    if window > 0 then redis.call('PEXPIRE', KEYS[2], math.ceil(ttl * 1000)) end
  end
end
return {text(total_cost), text(total_tokens)}
"""
)

# KEYS: the run's event stream. ARGV: keep (ms), '1' when the stream ends after these events, then number, text
# pairs. Event n is the stream entry n-0, the end mark after event n the entry n-1 (so one follows the other).
ADD_EVENTS = """
local last = ''
for i = 3, #ARGV, 2 do
  local added = redis.pcall('XADD', KEYS[1], ARGV[i] .. '-0', 'e', ARGV[i + 1])
  if type(added) == 'table' and added.err then return 'behind' end
  last = ARGV[i]
end
if ARGV[2] == '1' then
  if last == '' then
    local top = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)[1]
    if top == nil then return 'ok' end
    last = string.match(top[1], '^(%d+)-')
  end
  local added = redis.pcall('XADD', KEYS[1], last .. '-1', 'end', '1')
  if type(added) == 'table' and added.err then return 'behind' end
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 'ok'
"""
