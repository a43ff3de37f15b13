#!lua name=sapo_pool
-- The pool's Redis Functions (library sapo_pool), loaded by lib/pool/pool.c
-- at a connect that finds another library of the name or none (FUNCTION
-- LOAD REPLACE). The build embeds this file as a C string (Makefile:
-- pool_lua.inc). 16777280 below is pool.c's ENTRY_MAX_BYTES: a record of
-- records.h's REC_MAX_BYTES and a signature.
--
-- Keys. The functions this sapo calls (sapo_publish_node, sapo_range,
-- sapo_register) touch only the keys they are given in KEYS, all of one
-- node and so of one slot on a cluster (the node's hash tag). That is
-- Redis Cluster's contract: while the slot migrates, the source runs the
-- call while it holds every key, answers ASK once it holds none, and the
-- target answers TRYAGAIN while the keys are split between the two; the
-- client follows each (lib/pool/route.c). A function that reads keys it
-- was not given would run on the target from empty counters and reset
-- the node's sequence. The functions older builds call read keys they
-- find at run time (the node set's members, or a node's keys from its
-- base): they run on one Redis only, flagged no-cluster, and their
-- one-key calls of sapo_publish_node and sapo_range are refused on a
-- cluster.

-- Any node can write its own keys with plain commands when its ACL
-- user allows them: a number, or a key of the wrong type. So every
-- read of a node's key is protected (pcall: a wrong type is a bad
-- key, not a failed call), every number read back is checked, and a
-- node whose range is not two sane integers is skipped and counted
-- as bad; its live count weighs at most the sampler's per-node bound.
local function get(key)
  local v = redis.pcall('GET', key)
  if type(v) == 'table' then return nil, true end
  return v, false
end
-- A node's keys, as one table: its counters (hi, lo: the newest and the
-- oldest live seq), entries (e), entries' meta (m) and summary (s)
local function node_keys(base)
  return {hi = base .. ':hi', lo = base .. ':lo', e = base .. ':e', m = base .. ':m', s = base .. ':s'}
end
-- The node's keys a call of function fn declares in KEYS, as names
-- orders them (all of one base, each named for its place); or, from a
-- sapo before every key was declared, the node's base (S:n:N:) alone,
-- taken on one Redis and refused on a cluster (where the base carries
-- the node's hash tag), since a call that reads keys it did not declare
-- there runs from empty keys while the node's slot migrates. nil and an
-- error reply when neither
local function call_keys(fn, keys, names)
  if #keys == 1 then
    if not string.find(keys[1], '{', 1, true) then return node_keys(string.sub(keys[1], 1, -2)) end
    return nil, redis.error_reply(fn .. ': called with one key, as sapo before its keys were declared; on a ' ..
                                  'Redis Cluster that loses entries while the node\'s slot moves: update this node')
  end
  local base = #keys == #names and string.match(keys[1], '^(.*):' .. names[1] .. '$')
  local k = {}
  for i, n in ipairs(names) do
    if not base or keys[i] ~= base .. ':' .. n then
      return nil, redis.error_reply(fn .. ': keys must be a node\'s :' .. table.concat(names, ', :'))
    end
    k[n] = keys[i]
  end
  return k
end
local function range(k)
  local h, bad_h = get(k.hi)
  local l, bad_l = get(k.lo)
  local hi, lo = tonumber(h or '0'), tonumber(l or '1')
  if bad_h or bad_l or not hi or not lo or hi ~= math.floor(hi) or lo ~= math.floor(lo) or lo < 1 or hi > 2^52 then
    return 1, 0, true
  end
  return lo, hi, false
end
-- a field of a node's hash: nil when missing or the key is no hash
local function field(key, f)
  local v = redis.pcall('HGET', key, f)
  if type(v) ~= 'string' then return nil end
  return v
end
-- a field's length: 0 when missing or the key is no hash
local function field_len(key, f)
  local n = redis.pcall('HSTRLEN', key, f)
  if type(n) ~= 'number' then return 0 end
  return n
end
-- entries meta: seq -> "round:ms", the publisher's round and the
-- server's time when it was published
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function meta(k, seq)
  local m = field(k.m, seq)
  if not m then return nil, nil end
  local r, t = string.match(m, '^(%d+):(%d+)$')
  return tonumber(r), tonumber(t)
end
-- an entry is fresh when its round is among the publisher's last
-- `rounds` (its newest entry's round counting) and it is younger than
-- ms; an entry without meta is not
local function fresh(k, seq, newest, rounds, ms, now)
  local r, t = meta(k, seq)
  if not r then return false end
  if rounds > 0 and r + rounds <= newest then return false end
  if ms > 0 and now - t > ms then return false end
  return true
end
-- A node's summary, S:n:N:s, kept by its own publishes so that a draw
-- reads a node with one MGET: "lo hi", then per publisher round in the
-- live range "round seq ms" (the round, its first seq, that entry's
-- publish time), oldest first, at most 64 (the oldest two merge, keeping
-- the older round and time: an entry can look older than it is, never
-- fresher). nil when it is not one (a node may write its own keys).
local function summary_parse(s)
  if type(s) ~= 'string' or #s > 4096 then return nil end
  local t = {}
  for x in string.gmatch(s, '%S+') do
    local v = tonumber(x)
    if not v or v ~= math.floor(v) or v < 0 or v > 2^52 then return nil end
    t[#t + 1] = v
  end
  if #t < 5 or (#t - 2) % 3 ~= 0 or t[1] < 1 or t[2] < t[1] or t[4] ~= t[1] then return nil end
  local rounds = {}
  for i = 3, #t, 3 do
    if t[i + 1] > t[2] or (i > 3 and t[i + 1] <= t[i - 2]) then return nil end
    rounds[#rounds + 1] = {t[i], t[i + 1], t[i + 2]}
  end
  return t[1], t[2], rounds
end
-- after a publish of seqs first..hi in round at now, with lo the oldest
-- live seq
local function summary_write(k, lo, hi, first, round, now, ttl)
  local _, _, rounds = summary_parse((get(k.s)))
  if not rounds then
-- none yet (or not one): the entries kept from before count as of the
-- oldest one's round and time
    rounds = {}
    if lo < first then
      local r, t = meta(k, lo)
      rounds[1] = {r or round, lo, t or now}
    end
  end
  if #rounds == 0 or rounds[#rounds][1] ~= round then rounds[#rounds + 1] = {round, first, now} end
  while #rounds >= 2 and rounds[2][2] <= lo do table.remove(rounds, 1) end
  rounds[1][2] = lo
  while #rounds > 64 do
    rounds[2] = {rounds[1][1], rounds[1][2], rounds[1][3]}
    table.remove(rounds, 1)
  end
  local out = {lo, hi}
  for _, r in ipairs(rounds) do
    out[#out + 1] = r[1]; out[#out + 1] = r[2]; out[#out + 1] = r[3]
  end
  redis.call('SET', k.s, table.concat(out, ' '), 'PX', ttl)
end
-- A publish of records to a node's keys k: its bound (the node's own,
-- and the operator's swarm_max, which no node can raise), window and
-- summary kept in step. The count kept, or an error reply
local function publish(k, maxlen, swarm_max, rounds, ms, round, records)
-- a bound that is no positive integer is ignored: it cannot stop
-- publishing
  if swarm_max and swarm_max >= 1 and swarm_max == math.floor(swarm_max) and (not maxlen or maxlen > swarm_max) then
    maxlen = swarm_max
  end
  if not maxlen or maxlen < 1 then return redis.error_reply('sapo_publish: bound must be a positive number') end
  if not rounds or not ms or not round or rounds < 0 or ms < 0 or round < 0 then
    return redis.error_reply('sapo_publish: window and round must be numbers of at least 0')
  end
  for _, rec in ipairs(records) do
    if #rec > 16777280 then return redis.error_reply('sapo_publish: record over 16777280 bytes') end
  end
  local lo, hi, broken = range(k)
  if broken then return redis.error_reply('sapo_publish: this node\'s counters ' .. k.hi .. ' and :lo are not sane integers') end
  local now, first = now_ms(), hi + 1
  for _, rec in ipairs(records) do
    hi = hi + 1
    redis.call('HSET', k.e, hi, rec)
    redis.call('HSET', k.m, hi, string.format('%d:%d', round, now))
  end
  redis.call('SET', k.hi, hi)
-- past the bound, and (with a window) past the window: the oldest go
  while hi - lo + 1 > maxlen or (lo <= hi and (rounds > 0 or ms > 0) and not fresh(k, lo, round, rounds, ms, now)) do
    redis.call('HDEL', k.e, lo)
    redis.call('HDEL', k.m, lo)
    lo = lo + 1
  end
  redis.call('SET', k.lo, lo)
-- a node that stops publishing leaves nothing behind past the window
-- (an hour without one). So its entries are the only keys with a TTL,
-- and a Redis run with maxmemory and maxmemory-policy volatile-ttl,
-- when full, drops whole windows of the nodes that published least
-- recently first, never an identity or a counter.
  local ttl = ms > 0 and ms or 3600000
  redis.call('PEXPIRE', k.e, ttl)
  redis.call('PEXPIRE', k.m, ttl)
  summary_write(k, lo, hi, first, round, now, ttl)
  return hi - lo + 1
end
-- what nodes of older sapo builds call (one Redis only): keys the node's
-- base and the node set, args node, bound, the operator's bound key,
-- window rounds, window ms, round, records
redis.register_function{function_name = 'sapo_publish', flags = {'no-cluster'}, callback = function(keys, args)
  local n = publish(node_keys(string.sub(keys[1], 1, -2)), tonumber(args[2]), tonumber(get(args[3]) or ''),
                    tonumber(args[4]), tonumber(args[5]), tonumber(args[6]), {unpack(args, 7)})
  if type(n) == 'number' then redis.call('SADD', keys[2], args[1]) end
  return n
end}
-- this build's: keys the node's :hi, :lo, :e, :m and :s; args the
-- operator's bound for the node as the client read it ('' when none: the
-- bound's key is read by the client, since a key declared to FCALL is
-- one the caller may write, and a node may not write its bound), bound,
-- window rounds, window ms, round, records. The client adds the node to
-- the node set itself (on a cluster the set lives in another slot).
-- Older builds declare the node's base alone and pass the bound's key
-- name: run on one Redis as before, refused on a cluster
redis.register_function('sapo_publish_node', function(keys, args)
  local k, refused = call_keys('sapo_publish_node', keys, {'hi', 'lo', 'e', 'm', 's'})
  if not k then return refused end
  local swarm_max = tonumber(args[1])
  if #keys == 1 then swarm_max = tonumber(get(args[1]) or '') end
  return publish(k, tonumber(args[2]), swarm_max, tonumber(args[3]), tonumber(args[4]), tonumber(args[5]),
                 {unpack(args, 6)})
end)
local function live(prefix, exclude, cap)
  local nodes = redis.call('SMEMBERS', prefix .. ':nodes')
  table.sort(nodes)
  local list, total, bad = {}, 0, 0
  for _, n in ipairs(nodes) do
    if n ~= exclude then
      local k = node_keys(prefix .. ':n:' .. n)
      local lo, hi, broken = range(k)
      if broken then bad = bad + 1 end
      if hi >= lo then
        local count = math.min(hi - lo + 1, cap)
        table.insert(list, {k, hi - count + 1, count, n})
        total = total + count
      end
    end
  end
  return list, total, bad
end
-- draws with replacement, uniform over every other node's live entries:
-- what bin/pool sample of older builds calls (this one draws with
-- pool_draw), kept for them. Each draw is answered by the node it is
-- stored under, then the entry; one over max_bytes by its length, so the
-- client counts it without receiving it
redis.register_function{function_name = 'sapo_sample', flags = {'no-writes', 'no-cluster'}, callback = function(keys, args)
  local cap, max_bytes = tonumber(args[2]) or 1, tonumber(args[3]) or 0
  local list, total = live(string.sub(keys[1], 1, -2), args[1], cap)
  local out = {}
  if total == 0 then return out end
  for i = 4, #args do
    local r = math.floor((tonumber(args[i]) or 0) * total)
    if r >= total then r = total - 1 end
    for _, e in ipairs(list) do
      if r < e[3] then
        local n = field_len(e[1].e, e[2] + r)
        if n > max_bytes then
          table.insert(out, e[4])
          table.insert(out, n)
        elseif n > 0 then
          table.insert(out, e[4])
          table.insert(out, field(e[1].e, e[2] + r) or '')
        end
        break
      end
      r = r - e[3]
    end
  end
  return out
end}
-- what nodes of older sapo builds call (one Redis only): how many nodes
-- were skipped for bad keys, then other nodes' fresh ranges: node, first fresh seq, newest seq, the newest entry's round,
-- as a flat list. args: exclude, cap, window in rounds, window in ms
-- (0 = none; with both 0, a node's newest cap entries), candidates, and
-- then, from pool_fresh.c, the nodes to read (it reads the summaries
-- itself and asks here only for nodes without one); without them, nodes
-- as below.
-- A swarm of at most `candidates` nodes is read whole (the draw is
-- exact); a larger one by that many nodes picked at random
-- (SRANDMEMBER), so a draw costs the same at 10 or 10,000 nodes. Each
-- node's summary (one MGET for all) gives its fresh range; a node
-- without one is read from its counters and entries' meta, its first
-- fresh entry found by bisection (entries get older with their seq).
local function first_fresh(k, lo, hi, newest, rounds, ms, now)
  if not fresh(k, hi, newest, rounds, ms, now) then return hi + 1 end
  local a, b = lo, hi -- the answer is in [a, b]; b is fresh
  while a < b do
    local mid = math.floor((a + b) / 2)
    if fresh(k, mid, newest, rounds, ms, now) then b = mid else a = mid + 1 end
  end
  return a
end
redis.register_function{function_name = 'sapo_fresh', flags = {'no-writes', 'no-cluster'}, callback = function(keys, args)
  local prefix = string.sub(keys[1], 1, -2)
  local cap, rounds, ms = tonumber(args[2]) or 1, tonumber(args[3]) or 0, tonumber(args[4]) or 0
  local want = tonumber(args[5]) or 0
  local nodes
  if #args > 5 then
    nodes = {unpack(args, 6)}
  elseif want > 0 and redis.call('SCARD', prefix .. ':nodes') > want then
    nodes = redis.call('SRANDMEMBER', prefix .. ':nodes', want + 1)
  else
    nodes = redis.call('SMEMBERS', prefix .. ':nodes')
  end
  table.sort(nodes)
  local now, out, bad = now_ms(), {0}, 0
  local names, skeys = {}, {}
  for _, n in ipairs(nodes) do
    if n ~= args[1] then
      names[#names + 1] = n
      skeys[#skeys + 1] = prefix .. ':n:' .. n .. ':s'
    end
  end
  local summaries = #skeys > 0 and redis.pcall('MGET', unpack(skeys)) or {}
  if type(summaries) ~= 'table' or summaries.err then summaries = {} end
  for i, n in ipairs(names) do
    local nk = node_keys(prefix .. ':n:' .. n)
    local lo, hi, first, newest
    local slo, shi, rs = summary_parse(summaries[i])
    if rs then
-- the summary: the newest round, and the oldest fresh round's first seq
      lo, hi, newest = slo, shi, rs[#rs][1]
      first = hi + 1
      for k = #rs, 1, -1 do
        local r = rs[k]
        if (rounds > 0 and r[1] + rounds <= newest) or (ms > 0 and now - r[3] > ms) then break end
        first = r[2]
      end
      if rounds == 0 and ms == 0 then first = lo end
    else
-- no summary (a node of an older sapo, or one planted): the counters,
-- and the entries' meta
      local broken
      lo, hi, broken = range(nk)
      if broken then bad = bad + 1 end
      newest = hi >= lo and (meta(nk, hi) or 0) or 0
      first = lo
      if hi >= lo and (rounds > 0 or ms > 0) then first = first_fresh(nk, lo, hi, newest, rounds, ms, now) end
    end
    first = math.max(first, hi - cap + 1)
    if hi >= lo and first <= hi then
      table.insert(out, n); table.insert(out, first); table.insert(out, hi); table.insert(out, newest)
    end
  end
  out[1] = bad
  return out
end}
-- one node's fresh range, read from its counters and entries' meta (for
-- a node whose summary the client could not read): keys the node's :hi,
-- :lo and :m (older builds: its base alone, on one Redis), args cap,
-- window in rounds, window in ms. {bad, first, hi, newest}, or {bad}
-- when nothing is fresh; bad is 1 when the node's counters are not sane
redis.register_function{function_name = 'sapo_range', flags = {'no-writes'}, callback = function(keys, args)
  local k, refused = call_keys('sapo_range', keys, {'hi', 'lo', 'm'})
  if not k then return refused end
  local cap, rounds, ms = tonumber(args[1]) or 1, tonumber(args[2]) or 0, tonumber(args[3]) or 0
  local lo, hi, broken = range(k)
  local newest = hi >= lo and (meta(k, hi) or 0) or 0
  local first = lo
  if hi >= lo and (rounds > 0 or ms > 0) then first = first_fresh(k, lo, hi, newest, rounds, ms, now_ms()) end
  first = math.max(first, hi - cap + 1)
  if hi >= lo and first <= hi then return {broken and 1 or 0, first, hi, newest} end
  return {broken and 1 or 0}
end}
-- the entries named by (node, seq) pairs: per pair its meta ("round:ms"
-- or "") and the entry, or its length when over max_bytes, or 0 when
-- it is gone; and the server's time first. args: max_bytes, pairs.
-- This sapo reads entries with pipelined HGETs (pool_draw.c, fetch: no
-- copy through Lua); the function stays for nodes of older versions
-- that share the Redis (one Redis only), since any node's connect
-- replaces the library
redis.register_function{function_name = 'sapo_get', flags = {'no-writes', 'no-cluster'}, callback = function(keys, args)
  local prefix, max_bytes = string.sub(keys[1], 1, -2), tonumber(args[1]) or 0
  local out = {now_ms()}
  for i = 2, #args - 1, 2 do
    local nk = node_keys(prefix .. ':n:' .. args[i])
    table.insert(out, field(nk.m, args[i + 1]) or '')
    local n = field_len(nk.e, args[i + 1])
    if n > max_bytes or n == 0 then table.insert(out, n)
    else table.insert(out, field(nk.e, args[i + 1]) or 0) end
  end
  return out
end}
-- first come: a key once set is never replaced here, and the caller
-- learns which key holds the id
redis.register_function('sapo_register', function(keys, args)
  if #args[1] ~= 64 or not string.match(args[1], '^[0-9a-f]+$') then
    return redis.error_reply('sapo_register: public key must be 64 lowercase hex digits')
  end
  redis.call('SET', keys[1], args[1], 'NX')
  return redis.call('GET', keys[1])
end)
-- what bin/pool size of older builds calls (one Redis only; this one
-- reads the counters itself)
redis.register_function{function_name = 'sapo_size', flags = {'no-writes', 'no-cluster'}, callback = function(keys, args)
  if args[1] then
    local lo, hi = range(node_keys(keys[1] .. 'n:' .. args[1]))
    return math.max(hi - lo + 1, 0)
  end
  local _, total = live(string.sub(keys[1], 1, -2), '', 2^52)
  return total
end}
