-- index: the optional index of declared JSON fields (rjq.h
-- rjq_queue_set_index, rjq_queue_find; lib.lua index_entries): declare
-- the fields, read the declaration, index the jobs it does not cover yet
-- (a bounded step), or look a value up.
-- KEYS (src/keys.def; bound to these locals): meta, cols
-- ARGV: 1 the operation:
--   'set', then the fields (none: no index): a declaration that differs
--     from the one recorded replaces it and drops the index (UNLINK: freed
--     in the background), which covers no job then (see 'fill');
--   'get';
--   'fill', 2 cursor, 3 count: one HSCAN step of the payload column
--     (COUNT count), indexing the jobs read that the index does not cover;
--   'find', 2 field, 3 value, 4 after ('' to start, else the last id of
--     the page before), 5 limit: the jobs whose field has that value, in
--     id order (bytewise), after that id.
-- The index covers a job when the job has an entry in the indexed column
-- (enqueue.lua, 'fill'); that column only holds jobs that exist (entries
-- leave with the record, lib.lua delete_jobs), so the index covers every
-- job exactly when the column has as many entries as the payload column.
-- Returns, for set and get: { fields (space-separated, '' none), jobs
-- covered, jobs }; for fill: { next cursor ('0': done), jobs covered,
-- jobs, jobs indexed by this step }; for find: { 0, covered, jobs, id1,
-- state1, ... }, or { -1, 0, 0 } (the field is not declared) or { -2,
-- covered, jobs } (the index does not cover every job: nothing is looked
-- up, the caller scans).
local J = columns(cols)
expect_types({meta, 'hash', J.x, 'hash', J.i, 'zset', J.d, 'hash'})
local op = ARGV[1]
if op == 'set' then
  local f = {}
  for i = 2, #ARGV do
    if not string.match(ARGV[i], '^[%w_.-]+$') or #ARGV[i] > 64 then
      return redis.error_reply('ERR rjq index: bad field name')
    end
    f[#f + 1] = ARGV[i]
  end
  local text = table.concat(f, ' ')
  if text ~= (redis.call('HMGET', meta, 'index')[1] or '') then
    redis.call('UNLINK', J.x, J.i)
    if text == '' then redis.call('HDEL', meta, 'index') else redis.call('HSET', meta, 'index', text) end
  end
  op = 'get'
end
if op == 'get' then
  return {redis.call('HMGET', meta, 'index')[1] or '', redis.call('HLEN', J.x), redis.call('HLEN', J.d)}
end
local fields = index_fields(meta)
if op == 'fill' then
  if not fields then return redis.error_reply('ERR rjq index: no index declared') end
  local r = redis.call('HSCAN', J.d, ARGV[2], 'COUNT', ARGV[3])
  local ids, payloads, kv = {}, {}, r[2]
  for i = 1, #kv, 2 do ids[#ids + 1] = kv[i]; payloads[#payloads + 1] = kv[i + 1] end
  local had = #ids > 0 and hmget(J.x, ids) or {}
  local new, newp = {}, {}
  for k = 1, #ids do
    if not had[k] then new[#new + 1] = ids[k]; newp[#newp + 1] = payloads[k] end
  end
  index_jobs(J, fields, new, newp)
  return {r[1], redis.call('HLEN', J.x), redis.call('HLEN', J.d), #new}
end
if op ~= 'find' then return redis.error_reply('ERR rjq index: unknown operation') end
local declared = false
for _, f in ipairs(fields or {}) do
  if f == ARGV[2] then declared = true end
end
if not declared then return {-1, 0, 0} end
local covered, total = redis.call('HLEN', J.x), redis.call('HLEN', J.d)
if covered ~= total then return {-2, covered, total} end
local p = ARGV[2] .. '\0' .. #ARGV[3] .. ':' .. ARGV[3] .. '\0'
local from = ARGV[4] == '' and '[' .. p or '(' .. p .. ARGV[4]
local m = redis.call('ZRANGEBYLEX', J.i, from, '(' .. string.sub(p, 1, -2) .. '\1', 'LIMIT', 0,
                     ARGV[5])
local out, ids = {0, covered, total}, {}
for _, e in ipairs(m) do ids[#ids + 1] = string.sub(e, #p + 1) end
if #ids > 0 then
  local st = redis.call('HMGET', J.s, unpack(ids))
  for i = 1, #ids do
    out[#out + 1] = ids[i]
    out[#out + 1] = (state_of(st[i] or nil))
  end
end
return out
