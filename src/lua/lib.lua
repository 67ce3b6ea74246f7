-- rjq shared helpers. cmake/embed_lua.cmake builds two forms of the
-- scripts from them: one Redis function library (this file, then every
-- script as a function of KEYS and ARGV; loaded once, run with FCALL), and
-- for servers without functions (before Redis 7, or not permitted) each
-- script with this file prepended (EVALSHA). Either way a script is one
-- atomic transition, and this file only defines: it calls no command.
--
-- The key layout: src/keys.def declares every key and channel of a queue
-- (<prefix>:{Q}:<name>, all with the hash tag {Q}) and of the client
-- prefix, with its type and what it holds, and each script's KEYS in
-- order. The build writes that table at the head of this file (in its
-- embedded form) and binds each script's KEYS to named locals before its
-- first line (e.g. `ready`, `active`, `cols`: the job columns,
-- `monitored`, `events`), so no script indexes KEYS by number
-- (tests/keys_declared.sh).
--
-- Job records are stored by column: one hash per field, keyed by job id,
-- so a script serves a whole batch with one HMGET/HSET per field instead
-- of one call per job (a redis.call costs ~1 us; five per job capped the
-- drain rate):
--   payload   the payload; a job exists while it has one
--   state     "<state> <attempts> [<token>] [@<times>]": state is ready,
--             delayed, active, completed, dead or cancelled, attempts the
--             runs started, token that of the current claim (active), or
--             of the last attempt (completed, dead, cancelled; none when
--             it never ran); absent means "ready 0" (see state_of). One
--             field, so a claim writes one value per job and a completion
--             reads one to check the token. times: the job's server times
--             in ms, "<enqueued>,<last start>,<end>", each empty while not
--             known (see times_split); every transition writes them with
--             the state it writes (a value 16 bytes longer: a field of
--             their own cost a job +3 us of Redis CPU per write, measured).
--             Values of rjq versions before times have none.
--   options   "priority,max_attempts,backoff[;timeout[;dedup]]" when
--             not all defaults; backoff is "kind,base,max" or empty,
--             timeout the job's run time limit in ms, dedup how long its
--             id stays reserved after it finished (ms); empty or absent:
--             none. A job with headers (src/headers.h) has them after a
--             '\n': "<options>\n<key>=<value>[\n<key>=<value>...]" (its
--             options all defaults: "0,,"); every reader of the options
--             stops at the '\n' (parse_options), the claim and the pushes
--             hand the headers to the worker (start_jobs)
--   result    result of a completed job; absent when empty (most jobs
--             return nothing, and a field per job costs a completion an
--             insert into a hash as large as the retention, and the
--             retention sweep a delete: -12% Redis CPU in a drain)
--   error     last error
--   failtoken token of the claim whose failure was applied last
--   watchers  reply channels of producers awaiting it (space-separated);
--             dropped when the job finishes (completed, dead, cancelled),
--             so the column holds unfinished jobs only and stays small
-- Scripts that touch job records get the seven column keys as the group
-- COLUMNS of src/keys.def (the local `cols`, see columns()), so every key
-- a script touches is declared. A job's name in messages is
-- <prefix>:{Q}:job:<id>; scripts that publish get the "<prefix>:{Q}:job:"
-- part in ARGV.
--
-- Order within a priority. Priority p owns the scores [-p*2^32, -p*2^32 +
-- 2^32): |p| <= 1e6 keeps every score an exact integer (|score| < 2^52; a
-- double is exact below 2^53), and classes never overlap, so score order
-- is strict priority. Within a class the rank orders the jobs: 0 for a
-- job put back at the head (handed back, reclaimed; several tie, and Redis
-- orders those by id), else one made from the job's sequence number s
-- (stats seq; a re-queued job takes a new one, see next_seq):
--   rank = s                 while s < 2^32 (what seq % 2^32 gave before)
--   rank = 2^31 + s % 2^31   from 2^32 on
-- So from 2^32 on, new jobs rank in [2^31, 2^32), and s % 2^31 starts again
-- at 0 once per 2^31 sequence numbers, a new rank window (the first at
-- 2^32, where seq % 2^32 used to wrap to 0 and put later jobs first: issue
-- 12). The script that takes the number that starts a window (a multiple
-- of 2^31, from 2^32 on) first renumbers the waiting jobs of prio not at the head 1, 2, 3... in
-- their current order (renumber_prio): they then all rank below 2^31,
-- below every job ranked after them. Nothing is stored for this (a base
-- kept in stats would cost a read per call): the rank is a function of s,
-- which the scripts have anyway, so an enqueue or a claim makes no extra
-- Redis call (~0.1 us of Lua per call). The renumbering costs O(waiting
-- priority jobs) once per ~2.1 billion enqueues and re-queues, in the one
-- call that takes the number: ~2.6 us per waiting priority job (a million:
-- 2.6 s on Redis 7.0), during which the server serves nothing else (past
-- busy-reply-threshold, 5 s, others get BUSY, which rjq retries). Order
-- stays exact while fewer than 2^31 - 1 priority jobs wait at a
-- renumbering (a zset that size needs ~200 GB); any beyond that share
-- rank 2^31 - 1 (ordered by id among themselves, still before every later
-- job).
-- Queues written by earlier versions need nothing: below 2^32 their ranks
-- are these; one already past 2^32 keeps the order those versions gave
-- its waiting jobs (theirs since their last wrap rank below every new
-- job), and its next renumbering carries that order on.

-- A waiter for a slot under a queue's concurrency limit that did not claim
-- within this long of its notice loses its place (claim.lua).
local WAIT_GRACE_MS = 10000
local PRIO_SHIFT = 4294967296 -- 2^32: the score span of one priority
local RANK_WINDOW = 2147483648 -- 2^31 (see "Order within a priority")
local DEFAULT_MAX_ATTEMPTS = 3 -- also RJQ's C default; not stored per job

-- Integral numbers as exact decimal strings (tostring() would switch to
-- exponent notation past 1e14).
local function int(x)
  return string.format('%d', x)
end

-- The same for small non-negative integers (attempt counts, lengths),
-- memoised: Lua turns a number into text with sprintf
-- (~0.1 us), and the hot paths make a few per job.
local SMALL_TEXT = {}
local function num(n)
  local s = SMALL_TEXT[n]
  if s then return s end
  s = int(n)
  if n >= 0 and n < 4096 then SMALL_TEXT[n] = s end
  return s
end

-- The job columns of a script (cols: its KEYS of group COLUMNS, bound in
-- the order of src/keys.def): J.d payload, J.s state, J.o options, J.r
-- result, J.e error, J.f failtoken, J.n watchers, J.a attempts, J.x indexed; J.all every column
-- (and J.i, the index: a sorted set, see delete_jobs); J.prefix the job name
-- prefix (for messages; may be nil).
local function columns(cols, prefix)
  -- Table constructors size the tables once (a loop of stores regrows
  -- them: 0.97 us against 0.38 us per call, measured). cols is only read:
  -- it serves as J.all.
  local d, s, o, r, e, f, n, a, x, i = unpack(cols, 1, 10) -- the order of src/keys.def
  return {d = d, s = s, o = o, r = r, e = e, f = f, n = n, a = a, x = x, i = i, prefix = prefix,
          all = cols}
end

-- Refuse, before anything is written, keys that hold the wrong type.
-- spec = { key, type, key, type, ... }
local function expect_types(spec)
  for i = 1, #spec, 2 do
    local t = redis.call('TYPE', spec[i])['ok']
    if t ~= 'none' and t ~= spec[i + 1] then
      error({err = 'WRONGTYPE ' .. spec[i] .. ' holds a ' .. t ..
                   ', rjq expects a ' .. spec[i + 1]})
    end
  end
end

-- redis.call(cmd, key, ...) on a key that should hold type `want`: a
-- wrongly typed key is refused with expect_types' error. The command itself
-- is the type check (a failed command writes nothing), which saves a TYPE
-- call, so use it for reads before the script's first write, or for that
-- first write.
-- want may be nil: errors are then passed on as they are.
local function typed(want, cmd, key, ...)
  local r = redis.pcall(cmd, key, ...)
  if type(r) == 'table' and r.err then
    if want and string.sub(r.err, 1, 9) == 'WRONGTYPE' then expect_types({key, want}) end
    if want == 'hash' and cmd == 'HINCRBY' and string.find(r.err, 'not an integer', 1, true) then
      error({err = 'WRONGTYPE field ' .. (...) .. ' of ' .. key ..
                   ' is not an integer, rjq expects one'})
    end
    error(r)
  end
  return r
end

-- Integer fields of hash key (counters, limits) as numbers, false when
-- absent: a value that is not an integer (written behind rjq's back) is
-- refused with an error that names the key and the field. Called before
-- a script's first write with the fields it reads or counts (HINCRBY would
-- fail on such a value halfway through), it checks the key's type too.
local function int_fields(key, ...)
  local f = {...}
  local v = typed('hash', 'HMGET', key, ...)
  for i = 1, #f do
    if v[i] then
      if not string.match(v[i], '^%-?%d+$') then
        error({err = 'WRONGTYPE field ' .. f[i] .. ' of ' .. key ..
                     ' is not an integer, rjq expects one'})
      end
      v[i] = tonumber(v[i])
    end
  end
  return v
end

-- Values of some fields of one job ({} entries are false when absent).
-- Scripts read with HMGET, never HGET: the client's own HGET (the fetch of
-- a big result) is then told apart in INFO commandstats.
local function fields(J, id, ...)
  local out = {}
  for i, f in ipairs({...}) do out[i] = redis.call('HMGET', J[f], id)[1] end
  return out
end

-- Lua's unpack() holds at most ~8000 values: big argument lists go out in
-- chunks of `step` values (a multiple of the group width).
local CHUNK = 1000

-- Whether jobs wait (nothing_ready: false) and a monitor listens, with
-- one EXISTS: a list or a sorted set exists while it has members, so 0
-- (the usual case) answers LLEN ready, ZCARD prio and the monitor's EXISTS
-- at once; else ready and prio are read (with their type check: a wrongly
-- typed key exists) and the monitor key is what the count leaves
-- (enqueue.lua, enqueue_one.lua). Returns nothing_ready, monitored_on.
local function ready_and_monitored(ready, prio, monitored)
  local exist = redis.call('EXISTS', ready, prio, monitored)
  if exist == 0 then return true, false end
  local nr, np = typed('list', 'LLEN', ready), typed('zset', 'ZCARD', prio)
  return nr == 0 and np == 0, exist - (nr > 0 and 1 or 0) - (np > 0 and 1 or 0) > 0
end

-- cmd key args..., in chunks of CHUNK groups of `width` values (from
-- args[from], default 1). With want (the key's type), a wrongly typed key
-- is refused as typed() does.
local function call_all(cmd, key, args, width, want, from)
  local step = CHUNK * (width or 1)
  for i = from or 1, #args, step do
    typed(want, cmd, key, unpack(args, i, math.min(i + step - 1, #args)))
  end
end

-- call_all with every chunk's error ignored (a wrongly typed key that
-- another script refuses: the sweep's deps_due.lua): what a read (HMGET)
-- gives, one value per arg: false when absent, nil when its chunk failed.
local function try_all(cmd, key, args, width)
  local step, out = CHUNK * (width or 1), {}
  for i = 1, #args, step do
    local last = math.min(i + step - 1, #args)
    local r = redis.pcall(cmd, key, unpack(args, i, last))
    if type(r) == 'table' and not r.err then
      for k = i, last do out[k] = r[k - i + 1] or false end
    end
  end
  return out
end

-- HMGET key ids (any number of ids, none too: {} without a call, as HMGET
-- with no field is refused, failing its script); absent fields are false.
-- With want ('hash'), a wrongly typed key is refused as typed() does (see
-- there).
local function hmget(key, ids, want)
  if #ids == 0 then return {} end
  if #ids <= CHUNK then return typed(want, 'HMGET', key, unpack(ids)) end
  local out = {}
  for i = 1, #ids, CHUNK do
    local part = typed(want, 'HMGET', key, unpack(ids, i, math.min(i + CHUNK - 1, #ids)))
    for j = 1, #part do out[#out + 1] = part[j] end
  end
  return out
end

-- HMGET key ids, or {} (every entry absent) when key does not exist: most
-- queues never set options or watchers, and for a batch an EXISTS is
-- cheaper than passing every id through Lua once more. A few ids go
-- straight to HMGET: one call either way.
local SPARSE_MIN = 4
local function hmget_sparse(key, ids, want)
  if #ids >= SPARSE_MIN and redis.call('EXISTS', key) == 0 then return {} end
  return hmget(key, ids, want)
end

-- Delete the records of jobs ids (every column). For a batch, a column
-- that does not exist (options, error, failtoken of most queues) is
-- skipped after an EXISTS, as in hmget_sparse: an HDEL there would still
-- turn every id into a Redis string.
-- The index of declared JSON fields (index.lua; keys.def INDEXED, INDEX):
-- the entries of a job are "<field>\0<length>:<value>" for each declared
-- field its payload (a JSON object) has at its top level as a string or a
-- number (as its decimal text: integers without a fraction) of at most
-- INDEX_VALUE_MAX bytes; each is the member "<entry>\0<id>" of the index.
local INDEX_VALUE_MAX = 256 -- rjq.h RJQ_INDEX_VALUE_MAX

-- The declared fields of the queue (meta field "index"), a list; nil: none.
local function index_fields(meta)
  local v = redis.call('HMGET', meta, 'index')[1]
  if not v or v == '' then return nil end
  local f = {}
  for w in string.gmatch(v, '%S+') do f[#f + 1] = w end
  return f
end

-- The entries of payload p for fields (a list), as the column value
-- ("<len>:<entry>" each) and a list.
local function index_entries(fields, p)
  if string.byte(p, 1) ~= 123 then return '', {} end -- '{': an object, maybe
  local ok, t = pcall(cjson.decode, p)
  if not ok or type(t) ~= 'table' then return '', {} end
  local text, list = {}, {}
  for _, f in ipairs(fields) do
    local v = t[f]
    if type(v) == 'number' then
      if v == math.floor(v) and math.abs(v) < 2^53 then v = string.format('%d', v)
      elseif v == v and math.abs(v) ~= math.huge then v = string.format('%.17g', v)
      else v = nil end
    end
    if type(v) == 'string' and #v <= INDEX_VALUE_MAX then
      local e = f .. '\0' .. #v .. ':' .. v
      list[#list + 1] = e
      text[#text + 1] = #e .. ':' .. e
    end
  end
  return table.concat(text), list
end

-- Index the jobs ids (payloads: theirs, in order) for fields: writes each
-- job's entries (indexed column) and index members. The caller checked
-- the types of J.x and J.i.
local function index_jobs(J, fields, ids, payloads)
  local col, members = {}, {}
  for k, id in ipairs(ids) do
    local text, list = index_entries(fields, payloads[k])
    col[#col + 1] = id; col[#col + 1] = text
    for _, e in ipairs(list) do members[#members + 1] = 0; members[#members + 1] = e .. '\0' .. id end
  end
  if #col > 0 then call_all('HSET', J.x, col, 2) end
  if #members > 0 then call_all('ZADD', J.i, members, 2) end
end

-- Drop the index entries of jobs ids (their indexed values; nothing on a
-- queue without an index: one EXISTS).
local function unindex(J, ids)
  if #ids == 0 or redis.call('EXISTS', J.x) == 0 then return false end
  local v, gone = hmget(J.x, ids), {}
  for k, id in ipairs(ids) do
    local text, at = v[k], 1
    while text and at <= #text do
      local colon = string.find(text, ':', at, true)
      local len = tonumber(string.sub(text, at, colon - 1))
      gone[#gone + 1] = string.sub(text, colon + 1, colon + len) .. '\0' .. id
      at = colon + len + 1
    end
  end
  if #gone > 0 then call_all('ZREM', J.i, gone) end
  call_all('HDEL', J.x, ids)
  return true
end

local function delete_jobs(J, ids)
  if #ids == 0 then return end
  local batch = #ids >= SPARSE_MIN
  unindex(J, ids)
  for _, col in ipairs(J.all) do
    if col ~= J.i and col ~= J.x and (not batch or redis.call('EXISTS', col) == 1) then
      call_all('HDEL', col, ids)
    end
  end
end

-- A state column value: state, attempts (as text), token (nil when none),
-- times (the text after '@', nil when none; see times_split), and the
-- reply channel of an awaiting producer (nil when none): queue format 2
-- (docs/scripts.md "Queue format 2") keeps a pushed awaited job's channel
-- at the end of its active state, "active 1 <token> @<times> <channel>",
-- in place of the watchers column; every script reads both forms, and one
-- that writes such a job's state or watchers moves the channel to the
-- column first (channels_out).
local function state_text(v)
  if not v then return 'ready', '0', nil, nil end
  local s, a, rest = string.match(v, '^(%a+) (%d+) ?(.*)$')
  if not s then return v, '0', nil, nil end -- not rjq's format: no token matches
  local t, tm, ch = string.match(rest, '^(%S*) ?@(%S*) ?(%S*)$')
  if not t then t = rest end
  if t == '' then t = nil end
  if ch == '' then ch = nil end
  return s, a, t, tm, ch
end

-- A state value's times alone (state_text's tm, nil when none): for a
-- caller that has already checked the rest by its head (complete.lua).
local function state_times(v)
  return string.match(v, '@(%S*) ?%S*$')
end

-- The same with attempts as a number.
local function state_of(v)
  local s, a, t, tm, ch = state_text(v)
  return s, tonumber(a), t, tm, ch
end

-- The state column value for state s, attempts a, token t and times tm
-- (either may be nil).
local function state_value(s, a, t, tm)
  local v = s .. ' ' .. a
  if t then v = v .. ' ' .. t end
  if tm then v = v .. ' @' .. tm end
  return v
end

-- A job's times (state_text's tm, may be nil): enqueued, last start, end,
-- as text ('' when not known).
local function times_split(tm)
  local q, s, e = string.match(tm or '', '^(%d*),(%d*),(%d*)$')
  if not q then return '', '', '' end
  return q, s, e
end

-- Times tm with a new start (stamp: the server time as text), or an end.
local function times_started(tm, stamp)
  return (times_split(tm)) .. ',' .. stamp .. ','
end

local function times_ended(tm, stamp)
  local q, s = times_split(tm)
  return q .. ',' .. s .. ',' .. stamp
end

-- A job's options: priority, max attempts, backoff spec (nil = default),
-- timeout ms (nil = none), dedup ms (nil = none), headers text (nil =
-- none: see the options column above).
local function parse_options(o)
  if not o then return 0, DEFAULT_MAX_ATTEMPTS, nil, nil, nil end
  local h, at = nil, string.find(o, '\n', 1, true)
  if at then h = string.sub(o, at + 1); o = string.sub(o, 1, at - 1) end
  -- (the defaults before headers, a group job's column: no pattern match)
  if o == '0,,' then return 0, DEFAULT_MAX_ATTEMPTS, nil, nil, nil, h end
  local p, m, b, t, u = string.match(o, '^(%-?%d+),(%d*),([^;]*);?(%d*);?(%d*)$')
  if not p then return 0, DEFAULT_MAX_ATTEMPTS, nil, nil, nil, h end
  if b == '' then b = nil end
  return tonumber(p), tonumber(m) or DEFAULT_MAX_ATTEMPTS, b, tonumber(t), tonumber(u), h
end

-- A job's max attempts as a claim reply gives it (start_jobs): the number,
-- or for a job with headers the string "<max attempts>\n<headers>".
local function max_of(o)
  local _, m, _b, _t, _u, h = parse_options(o)
  if h then return num(m) .. '\n' .. h end
  return m
end

-- A new job's options as a producer gives them (src/validate.c),
-- "delay,priority,max_attempts,backoff[;timeout[;dedup[;debounce]]]":
-- returns its delay ms, its priority, its options column value (false when
-- what is stored would all be defaults: nothing stored), whether it has a
-- timeout, whether it is a debounce; nil when o is no such text. The one
-- reading for every script that creates jobs (enqueue.lua, fire.lua).
-- Headers follow the options after a '\n' (src/headers.h): stored with
-- them, unread here.
local function job_options(o)
  local h, at = nil, string.find(o, '\n', 1, true)
  if at then h = string.sub(o, at + 1); o = string.sub(o, 1, at - 1) end
  local d_, p_, m_, b_, t_, u_, x_ = string.match(o, '^(%d+),(%-?%d+),(%d+),([^;]*);?(%d*);?(%d*);?(%d*)$')
  if not d_ then return nil end
  local p, stored = tonumber(p_), false
  if h or p ~= 0 or tonumber(m_) ~= DEFAULT_MAX_ATTEMPTS or b_ ~= '' or t_ ~= '' or u_ ~= '' then
    if tonumber(m_) == DEFAULT_MAX_ATTEMPTS then m_ = '' end
    stored = p_ .. ',' .. m_ .. ',' .. b_
    if u_ ~= '' then stored = stored .. ';' .. t_ .. ';' .. u_
    elseif t_ ~= '' then stored = stored .. ';' .. t_ end
    if h then stored = stored .. '\n' .. h end
  end
  return tonumber(d_), p, stored, t_ ~= '', x_ == '1'
end


-- A queue's rate limit (the meta field `rate`, "<starts> <window ms>"):
-- starts, window; nil when none.
local function limits_rate(v)
  local n, w = string.match(v or '', '^(%d+) (%d+)$')
  if not n then return nil end
  return tonumber(n), tonumber(w)
end

-- ZMSCORE key ids, or {} (every entry absent) when key does not exist.
local function zmscore_sparse(key, ids)
  if #ids == 0 or redis.call('EXISTS', key) == 0 then return {} end
  local out = {}
  for i = 1, #ids, CHUNK do
    local part = redis.call('ZMSCORE', key, unpack(ids, i, math.min(i + CHUNK - 1, #ids)))
    for j = 1, #part do out[#out + 1] = part[j] end
  end
  return out
end

-- With at most 128 members Redis keeps a zset as a listpack, where every
-- ZADD/ZREM scans it linearly (measured 1.3 us per job for the active set
-- of a 50-job worker against 0.3 us as a skiplist). The active set keeps
-- this member (a space: never a job id; score +inf: never expires) so it is
-- a skiplist from its first claim on. Readers of active skip it.
local ACTIVE_PIN = 'rjq: keeps this set a skiplist (longer than zset-max-listpack-value)'

-- The same for the watchers column, a hash, which holds unfinished jobs
-- only and so empties and refills: every write of it (set_watchers) also
-- writes this field (a space: never a job id; longer than hash-max-listpack-value), so
-- it stays a hash table instead of going back to a listpack that every
-- HMGET and HSET scans (measured 0.8 against 0.3 us of HMGET per job).
local WATCHERS_PIN = 'rjq: keeps this hash a table (a field longer than hash-max-listpack-value)'

-- The same for the dependents hash (keys.def DEPENDENTS), whose entries are
-- looked up by id at every registration (DEPS.register_ids) and every
-- completion of a queue that has some: as a listpack (up to 512 entries of
-- short values) each lookup walked it (measured +8.8k Redis instructions a
-- dependent at 33 a call, +17.3k at 500: bench/README.md "The dependents
-- hash pinned"). DEPS.register_ids writes this field (value '') with the
-- first entries it writes into a hash without it, ahead of them in the
-- same HSET, so the hash is a table from then on; every HDEL of entries
-- goes through DEPS.forget, which deletes the hash once only the pin is
-- left, so that the completions' EXISTS probes of dependents stay the sign
-- that the queue has entries. Every reader looks entries up by job id
-- (HMGET, HEXISTS; none walks or counts the hash), and this field has
-- spaces (never a job id): no reader sees it.
local DEPENDENTS_PIN = 'rjq: keeps the dependents hash a table (a field longer than hash-max-listpack-value)'

-- A field or member longer than hash-max-listpack-value and
-- zset-max-listpack-value (64 bytes by default): written into a hash or a
-- sorted set ahead of many fields or members, it makes the key a table
-- (a skiplist) before they go in, and stays one when the pin is deleted
-- right after, in the same script. A listpack (up to 512 fields of a hash,
-- 128 members of a set) is walked at each insert: a new deps hash given
-- 500 jobs in one deps_add walked ~14M Redis instructions (bench/README.md
-- "deps_add without per-job arrays"); as a table, two commands more and
-- nothing left behind (no reader sees the pin: it has spaces, never a job
-- id). Used by deps_add.lua for calls of TABLE_MIN jobs or more (a small
-- call into a small key stays a listpack: the pin's four commands would
-- cost it more than the walk).
local TABLE_PIN = 'rjq: makes this key a table before many writes (longer than the listpack value limits)'
local TABLE_MIN = 32

-- Queue format 2 (docs/scripts.md "Queue format 2"): the reply channels
-- held at the end of the states sv of jobs ids (sv[k] is ids[k]'s value as
-- read; false when none) move to the watchers column, appended to what it
-- holds, and those states are written again without them (sv[k] updated).
-- Every script that writes an active job's state (other than its
-- completion by complete_one.lua, which publishes to the channel itself)
-- or its watchers calls it first, after its type checks (it writes J.n
-- and J.s): so no channel is lost by a state written without it, and a
-- job's channel is never in both places. Returns the number moved.
local function channels_out(J, ids, sv)
  local moved, done = 0, nil
  for k, id in ipairs(ids) do
    local v = sv[k]
    if v and string.byte(v, #v) ~= 44 then -- (',': an active state's times end, no channel)
      local s, a, t, tm, ch = state_text(v)
      done = done or {}
      if ch and done[id] then -- (an id named twice: moved once)
        sv[k] = state_value(s, a, t, tm)
      elseif ch then
        done[id] = true
        local cur = redis.call('HGET', J.n, id)
        redis.call('HSET', J.n, id, cur and (cur .. ' ' .. ch) or ch, WATCHERS_PIN, '')
        v = state_value(s, a, t, tm)
        redis.call('HSET', J.s, id, v)
        sv[k] = v
        moved = moved + 1
      end
    end
  end
  return moved
end

-- Channels on a Redis Cluster are sharded (docs/cluster.md 3.6): every
-- channel a script publishes on carries its queue's hash tag, so SPUBLISH
-- stays in the script's slot, and the client subscribes with SSUBSCRIBE
-- on the slot's master; PUBSUB SHARDNUMSUB counts those subscribers (the
-- master's own: rjq subscribes on masters only). A standalone server keeps
-- PUBLISH and NUMSUB. Which one is found out once per library load (these
-- locals keep it across calls; with EVALSHA, once per call that
-- publishes): CLUSTER MYID answers only in cluster mode ("cluster support
-- disabled" otherwise; an ACL without it: CLUSTER SLOTS, which rjq's ACL
-- grants). A publish is redis.call(PUB or pub_mode(), ...): once known, an
-- upvalue read, nothing more (callgrind: no instruction count to tell
-- from a plain PUBLISH).
local PUB, NUMSUB -- 'PUBLISH'/'NUMSUB' or 'SPUBLISH'/'SHARDNUMSUB'; nil: not known yet
local function pub_mode()
  local sharded = false
  if redis.REDIS_VERSION_NUM then -- (before 7.0: no sharded pub/sub)
    local r = redis.pcall('CLUSTER', 'MYID')
    if type(r) == 'table' and r.err and not string.find(r.err, 'disabled', 1, true) then
      r = redis.pcall('CLUSTER', 'SLOTS')
    end
    sharded = not (type(r) == 'table' and r.err ~= nil)
  end
  if sharded then PUB, NUMSUB = 'SPUBLISH', 'SHARDNUMSUB'
  else PUB, NUMSUB = 'PUBLISH', 'NUMSUB' end
  return PUB
end

-- Subscribers of ch (PUBSUB NUMSUB, or SHARDNUMSUB on a cluster).
local function numsub(ch)
  if not NUMSUB then pub_mode() end
  return redis.call('PUBSUB', NUMSUB, ch)[2]
end

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The server time in ms as now_ms() gives it, as text (what the script
-- sends to Redis): the text made from TIME's reply once (now_ms parses
-- two numbers, and int() formats it again; a Lua number passed to
-- redis.call is printed with %.17g by Redis 7.0: ~3.6k Redis instructions
-- an argument, against ~0.9k for the same text, callgrind).
-- tonumber(stamp) is now_ms()'s number, for the callers that need one
-- (claim.lua, complete.lua); the lean pair (aw36) use the text alone: the
-- tonumber costs ~1.6k Redis instructions (it converts the text twice),
-- which the usual completion never uses and the usual enqueue gets by one
-- coercion (stamp + lease).
local MS_PAD = {'00', '0', ''}
local function now_stamp()
  local t = redis.call('TIME')
  local us = t[2]
  local n = #us
  local ms = n > 3 and string.sub(us, 1, n - 3) or '0'
  return t[1] .. MS_PAD[#ms] .. ms
end

-- A lease in the queue's slot (the scheduler's, tick.lua; a sharded
-- queue's re-splitter's, resplit.lua): one holder at a time, the key holds
-- its token with an expiry. Takes or keeps it for token for ms and returns
-- true; held by another: false and the ms left of its lease.
local function lease_take(key, token, ms)
  local holder = redis.call('GET', key)
  if holder and holder ~= token then return false, redis.call('PTTL', key) end
  redis.call('SET', key, token, 'PX', ms)
  return true
end

-- The score of a job of priority p with sequence number seq (0: at the
-- head of its class). See "Order within a priority" above.
local function prio_score(p, seq)
  local rank = seq
  if seq >= PRIO_SHIFT then rank = RANK_WINDOW + seq % RANK_WINDOW end
  return int(-p * PRIO_SHIFT + rank)
end

-- The sequence number in first..last that starts a rank window (a
-- multiple of 2^31 from 2^32 on; a call takes far fewer than 2^31 numbers,
-- so at most one), or false. A script that takes it runs renumber_prio
-- before it ranks a job with it.
local function rank_window_in(first, last)
  local s = last - last % RANK_WINDOW
  if s >= first and s >= PRIO_SHIFT then return s end
  return false
end

-- Give the jobs waiting in prio that are not at the head the ranks 1, 2,
-- 3... in their order (a page at a time: the order, hence every member's
-- index, stays as it is while the scores change).
local function renumber_prio(prio)
  local rank, total = 0, redis.call('ZCARD', prio)
  for first = 0, total - 1, CHUNK do
    local page = redis.call('ZRANGE', prio, first, first + CHUNK - 1, 'WITHSCORES')
    local za, k = {}, 0
    for i = 1, #page, 2 do
      local score = tonumber(page[i + 1])
      local r = score % PRIO_SHIFT -- exact: scores are integers below 2^53
      if r ~= 0 then
        if rank < RANK_WINDOW - 1 then rank = rank + 1 end
        if r ~= rank then
          za[k + 1] = int(score - r + rank); za[k + 2] = page[i]
          k = k + 2
        end
      end
    end
    if k > 0 then redis.call('ZADD', prio, unpack(za)) end
  end
end

-- A sequence number for a re-queued priority job (it adds no job, so it
-- counts as skipped: see stats above). prio: the queue's prio zset,
-- renumbered when the number starts a rank window.
local function next_seq(stats, prio)
  redis.call('HINCRBY', stats, 'skipped', 1)
  local s = redis.call('HINCRBY', stats, 'seq', 1)
  if rank_window_in(s, s) then renumber_prio(prio) end
  return s
end

-- Make job `id` (priority p) ready. head puts it first in its class.
-- Rings the doorbell when the queue had nothing ready, so a backlog costs
-- no publishes and an idle worker always hears about new work.
local function push_ready(ready, prio, stats, wake, id, p, head)
  if p == 0 then
    local n
    if head then n = redis.call('LPUSH', ready, id)
    else n = redis.call('RPUSH', ready, id) end
    if n == 1 and redis.call('ZCARD', prio) == 0 then
      redis.call(PUB or pub_mode(), wake, '1')
    end
  else
    local seq = 0
    if not head then seq = next_seq(stats, prio) end
    redis.call('ZADD', prio, prio_score(p, seq), id)
    if redis.call('ZCARD', prio) == 1 and redis.call('LLEN', ready) == 0 then
      redis.call(PUB or pub_mode(), wake, '1')
    end
  end
end

-- Hand back active job `id` (attempts: its count, o: its options column,
-- tm: its times) that its holder did not start: back to the head of its
-- priority class, the attempt its start counted undone.
local function hand_back(J, active, ready, prio, stats, wake, id, attempts, o, emit, tm)
  redis.call('ZREM', active, id)
  redis.call('HSET', J.s, id, state_value('ready', math.max(attempts - 1, 0), nil, tm))
  push_ready(ready, prio, stats, wake, id, (parse_options(o)), true)
  emit('released', id)
end

-- Schedule `id` at `due`. Returns true when it became the earliest: the
-- caller then rings the doorbell (once per script), so idle workers re-arm
-- their timer for it.
-- Take waiting job `id` (state "ready" or "delayed", options column o)
-- off where it waits: the delayed set, or by its priority the ready list
-- (LREM: O(its length)) or the prio set.
local function unqueue(ready, prio, delayed, id, state, o)
  if state == 'delayed' then redis.call('ZREM', delayed, id)
  elseif (parse_options(o)) == 0 then redis.call('LREM', ready, 1, id)
  else redis.call('ZREM', prio, id) end
end

local function push_delayed(delayed, id, due)
  redis.call('ZADD', delayed, int(due), id)
  return redis.call('ZRANGE', delayed, 0, 0)[1] == id
end

-- Delay before the next attempt. spec is "e,base,max" (exponential with
-- jitter in [d/2, d]) or "f,base,0" (fixed); nil means exponential 1 s..1 h.
local function backoff_ms(spec, attempt, jitter)
  local kind, base, cap = 'e', 1000, 3600000
  if spec then
    local k, b, c = string.match(spec, '^(%a),(%d+),(%d+)$')
    if k then kind, base, cap = k, tonumber(b), tonumber(c) end
  end
  if kind == 'f' then return base end
  if attempt < 1 then attempt = 1 end
  local d = base * 2 ^ (attempt - 1)
  if d > cap then d = cap end
  return math.floor(d / 2 + (d / 2) * jitter)
end

-- Results up to this size travel in the completion message; larger ones
-- are announced as 'big' and the awaiting client fetches them once.
local INLINE_RESULT_MAX = 65536

-- Outcomes ('completed', 'big', 'dead', 'cancelled', 'progress') for
-- awaiting clients. A client's reply channel "<prefix>:reply:<hex>:framed"
-- gets the outcomes of one script call together, in one message (more
-- past OUTCOME_MESSAGE_BYTES; finish() below publishes them): "+" then per
-- outcome "<kind> <name length> <body length>\n<name><body>". Any other
-- channel (a client of an older rjq, "<prefix>:reply:<hex>") gets one
-- message per outcome: "<kind>\n<job name>\n<body>".
local OUTCOMES = {} -- framed channel -> the call's outcomes (emptied by finish)
local OUTCOME_MESSAGE_BYTES = 65536

-- Dependencies (deps_watch.lua): a job that other jobs wait for has an
-- entry in its queue's dependents hash, which every finishing script
-- reads (complete.lua; notify_finished with J.dt), for dependents of any
-- queue (DEPS.register). Before depoq a job that jobs of other queues
-- wait for also got the mark DEPS_MARK among its watchers (no reply
-- channel is that), and one registered then may still hold it: notify()
-- publishes nothing for it and sets DEPS_TOLD[1] to the job's name, so a
-- finishing script can tell its caller (complete.lua, fail.lua,
-- cancel.lua) to release the dependents (deps_due.lua). A script that
-- reads DEPS_TOLD clears it first (it lives on between calls).
local DEPS_MARK = '~deps'
-- A job waiting for its dependencies this long after its registration is
-- registered again by the sweep (deps_resume.lua): its enqueuing client
-- may have died between deps_add and deps_watch (ms).
local DEPS_RESUME_MS = 60000
local DEPS_TOLD = {}
-- The score of a job put in the depsfin index now: minus the time (ms), so
-- the newest sort first. The index is small (a job leaves it at its
-- deps_done), so Redis keeps it as a listpack, where a member is inserted
-- by walking from the head to its place: minus the time puts it at the
-- head, where the time (last) walked every member, with their scores
-- read, for each job (45.6k instructions a dependent job at deps-bench's
-- 32 a call: bench/README.md, depoq); members of one score are ordered
-- by their bytes, so a call's jobs are sent in descending order
-- (DEPS.finished), each then going in at the head too. Readers page by rank
-- (deps_due.lua) and never read the score; an entry written with the time
-- (before depoq) sorts after every new one, which changes nothing.
local function DEPSFIN_SCORE() return '-' .. int(now_ms()) end
-- Since depfin1 a completion call indexes its jobs as ONE member: their
-- ids sorted and joined by spaces (no id has a byte <= 0x20: validate.c),
-- so the completion's ZADD and deps_done's ZREM are one listpack walk a
-- call, not one a job. Such a member of several ids goes in depsfinc, a
-- key of its own (depfin2): the sweep of every version before it reads
-- depsfin's members as one id each and would drop a member of several
-- (no dependents entry has its name), stranding their dependents; those
-- versions never read depsfinc. A member of one id (notify_finished, a
-- burial, a completion that leaves one such job) goes in depsfin, as
-- before. The readers: deps_due.lua splits a member on its spaces,
-- deps_done.lua removes the depsfinc member of exactly its ids, else
-- each id from depsfin.
local function DEPSFIN_MEMBER(ids)
  table.sort(ids)
  return table.concat(ids, ' ')
end

-- Publish (or queue, see above) an outcome of the job named k to every
-- reply channel in chs (space-separated).
local function notify(chs, k, kind, body)
  if not chs or chs == '' then return end
  if chs == DEPS_MARK then DEPS_TOLD[1] = k; return end
  if kind == 'completed' and #body > INLINE_RESULT_MAX then
    kind, body = 'big', ''
  end
  local framed, msg
  for ch in string.gmatch(chs, '%S+') do
    local buf = OUTCOMES[ch]
    if ch == DEPS_MARK then
      DEPS_TOLD[1] = k
    elseif not buf and string.find(ch, ':reply:%x+:framed$') then
      buf = {}
      OUTCOMES[ch] = buf
    end
    if ch == DEPS_MARK then
      -- (a mark, no channel: see DEPS_MARK)
    elseif buf then
      framed = framed or (kind .. ' ' .. #k .. ' ' .. #body .. '\n' .. k .. body)
      buf[#buf + 1] = framed
    else
      msg = msg or (kind .. '\n' .. k .. '\n' .. body)
      redis.call(PUB or pub_mode(), ch, msg)
    end
  end
end

-- The last outcome of job id (chs: its watchers, false when none): told,
-- and the watchers go with it (the column holds unfinished jobs only).
-- complete.lua does the same for a batch with one HDEL.
-- A job with dependents (DEPS_MARK among its watchers; or, when the
-- script declares the dependents hash as J.dt, an entry there: dependents
-- of the job's own queue leave no mark, DEPS.register) sets DEPS_TOLD and
-- goes in J.df (the depsfin index, which every script that can finish
-- such a job declares), so the sweep finds it if its finisher dies before
-- telling them.
local function notify_finished(J, id, chs, kind, body)
  local told = chs and string.find(chs, DEPS_MARK, 1, true)
  if not told and J.dt and redis.pcall('HEXISTS', J.dt, id) == 1 then -- (a wrongly typed hash: none)
    told = true
    DEPS_TOLD[1] = J.prefix .. id
  end
  if chs then notify(chs, J.prefix .. id, kind, body) end
  if J.df and told then
    redis.pcall('ZADD', J.df, DEPSFIN_SCORE(), id) -- (a wrongly typed index: the sweep's deps_due refuses it)
  end
  if chs then redis.call('HDEL', J.n, id) end
end

-- Write watchers: fv = { id, channels, ... }. Every write of the column
-- also writes WATCHERS_PIN, so it stays a hash table.
-- u (undoable(), may be nil): its first HSET checks the column's type,
-- and is not undone (so it comes after the writes made through u).
local function set_watchers(J, fv, u)
  fv[#fv + 1] = WATCHERS_PIN; fv[#fv + 1] = ''
  if u then
    local last = math.min(2 * CHUNK, #fv)
    u.call('hash', nil, 'HSET', J.n, unpack(fv, 1, last))
    if last < #fv then call_all('HSET', J.n, fv, 2, nil, last + 1) end
  else
    call_all('HSET', J.n, fv, 2)
  end
end

-- The emit() of a queue nobody monitors (per-job loops skip the call).
local function UNMONITORED() end

-- Queue events for monitors: published on channel `events` only while a
-- monitor holds the key `monitored`, so when nobody listens a script pays
-- one EXISTS per call, not a PUBLISH per job. Returns emit(event, id).
-- (Both are the script's KEYS of those names, src/keys.def.) An event
-- is "<event> <id> <server time ms>": the script's time, now when given
-- (the time its transitions use), else read once at the first event. The
-- events of one script call are published together when it ends, one
-- message per channel (up to EVENTS_PER_MESSAGE events a message, one a
-- line; ids have no newline): finish() below, which embed_lua.cmake wraps
-- around every script, also when it fails.
local EVENTS = {} -- channel -> the call's events (emptied by finish)
local EVENTS_PER_MESSAGE = 1000

-- on: whether the key `monitored` exists, when the caller knows (nil:
-- read here; monitor_and_dependents below asks one more key with it).
local function monitor(monitored, events, now, on)
  if on == nil then on = redis.call('EXISTS', monitored) == 1 end
  if on then
    local ch = events
    local t = now and int(now)
    local buf = EVENTS[ch]
    if not buf then
      buf = {}
      EVENTS[ch] = buf
    end
    return function(ev, id)
      t = t or int(now_ms())
      buf[#buf + 1] = ev .. ' ' .. id .. ' ' .. t
    end
  end
  return UNMONITORED
end

-- monitor() for a script that may finish a job with dependents of its own
-- queue (they leave no watchers mark, DEPS.register): the same EXISTS
-- asks whether the queue has a dependents hash (named twice: EXISTS counts
-- it twice), and J.dt is set to it only then (notify_finished reads its
-- entry), so a queue without dependents pays no command more.
local function monitor_and_dependents(J, monitored, events, dependents)
  local b = redis.call('EXISTS', monitored, dependents, dependents)
  if b >= 2 then J.dt = dependents end
  return monitor(monitored, events, nil, b % 2 == 1)
end

-- Writes that check their own key's type, so a script spares a TYPE per
-- key written (a TYPE costs as much as the write: ~7.4k Redis
-- instructions, callgrind). A script refuses wrongly typed keys before
-- its first write (expect_types); with undoable() it may leave keys out
-- of that check when their writes come first, each through u.call: a
-- write refused for the key's type (or any error) undoes, newest first,
-- every write made through u before it, drops the call's monitor events,
-- and refuses the call as expect_types would, with nothing written. So
-- only writes whose undo is exact go through u, each with its undo
-- (u.call(want, undo, cmd, key, ...): undo(r) gets the write's reply and
-- returns a function that undoes it, or nil when it cannot be undone
-- exactly: u.exact is then false, and the caller checks the keys it has
-- not written yet with expect_types before writing more). A write that
-- cannot be undone may go last (undo nil: nothing after it through u).
local function undoable()
  local u, steps = {exact = true}, {}
  local function back()
    for i = #steps, 1, -1 do steps[i]() end
    steps = {}
    for ch in pairs(EVENTS) do EVENTS[ch] = nil end
  end
  function u.call(want, undo, cmd, key, ...)
    local r = redis.pcall(cmd, key, ...)
    if type(r) == 'table' and r.err then
      back()
      if want and string.sub(r.err, 1, 9) == 'WRONGTYPE' then expect_types({key, want}) end
      if want == 'hash' and cmd == 'HINCRBY' and string.find(r.err, 'not an integer', 1, true) then
        error({err = 'WRONGTYPE field ' .. (...) .. ' of ' .. key ..
                     ' is not an integer, rjq expects one'}) -- (as typed() says it)
      end
      error(r)
    end
    if undo then
      local f = undo(r)
      if f then steps[#steps + 1] = f else u.exact = false end
    end
    return r
  end
  -- f: an undo of writes the caller makes through u.call with no undo of
  -- their own (it keeps their record, so one step undoes many writes)
  function u.step(f) steps[#steps + 1] = f end
  -- expect_types(spec), undoing the writes made through u when it refuses
  function u.check(spec)
    local ok, e = pcall(expect_types, spec)
    if not ok then back(); error(e) end
  end
  -- f(...) (a read, or a check: one result), undoing the writes made
  -- through u when it raises an error (a wrongly typed key it reads)
  function u.guard(f, ...)
    local ok, r = pcall(f, ...)
    if not ok then back(); error(r, 0) end
    return r
  end
  -- HSET of the field-value pairs fv (in chunks): undone by deleting the
  -- fields when they were all new (exact), else not exactly.
  function u.hset(key, fv)
    for i = 1, #fv, 2 * CHUNK do
      local part = {unpack(fv, i, math.min(i + 2 * CHUNK - 1, #fv))}
      u.call('hash', function(r)
        if r ~= #part / 2 then return nil end
        return function()
          local f = {}
          for j = 1, #part, 2 do f[#f + 1] = part[j] end
          redis.call('HDEL', key, unpack(f))
        end
      end, 'HSET', key, unpack(part))
    end
  end
  return u
end

-- An error caught by pcall, answered as the error it was: Redis 7.0's
-- pcall hands over a redis.call error, or an error({err = ...}), as its
-- message string ("WRONGTYPE ..."); raising that again would make it
-- "ERR WRONGTYPE ...". Other errors (Lua's own) are raised again.
local function reraise(e)
  if type(e) == 'table' and e.err then return e end
  if type(e) == 'string' and string.match(e, '^%u[%u%d_]* ') then return redis.error_reply(e) end
  error(e, 0)
end

-- The end of every script call (see embed_lua.cmake): its outcomes for
-- framed reply channels and its events go out, then its result or its
-- error.
local function finish(ok, res)
  local outcomes, events, failed = OUTCOMES, EVENTS, nil
  if next(outcomes) or next(events) then
    -- emptied first: a PUBLISH refused (an ACL without the channel) must
    -- leave nothing for the next call of the library
    OUTCOMES, EVENTS = {}, {}
    local function publish(ch, msg)
      local r = redis.pcall(PUB or pub_mode(), ch, msg)
      if type(r) == 'table' and r.err and not failed then failed = r end
    end
    for ch, buf in pairs(outcomes) do
      -- a message closes before the outcome that would take it past
      -- OUTCOME_MESSAGE_BYTES (one bigger outcome goes alone)
      local first, bytes = 1, 0
      for i = 1, #buf do
        if i > first and bytes + #buf[i] > OUTCOME_MESSAGE_BYTES then
          publish(ch, '+' .. table.concat(buf, '', first, i - 1))
          first, bytes = i, 0
        end
        bytes = bytes + #buf[i]
      end
      publish(ch, '+' .. table.concat(buf, '', first, #buf))
    end
    for ch, buf in pairs(events) do
      for i = 1, #buf, EVENTS_PER_MESSAGE do
        publish(ch, table.concat(buf, '\n', i, math.min(i + EVENTS_PER_MESSAGE - 1, #buf)))
      end
    end
  end
  if not ok then return reraise(res) end
  if failed then return failed end
  return res
end

-- Delete the records of finished jobs ids (finished: when each finished,
-- ms). An id whose job has a dedup time not yet over stays reserved in
-- the dedup set (J.u, which every script that deletes records declares)
-- until then. A job enqueued with dependencies loses their entry (J.dp,
-- the deps hash, declared by the same scripts) with its record.
local function forget_jobs(J, ids, finished)
  if #ids == 0 then return end
  local o = hmget_sparse(J.o, ids)
  local now, za = nil, {}
  for i = 1, #ids do
    if o[i] then
      local u = select(5, parse_options(o[i]))
      if u then
        now = now or now_ms()
        if finished[i] + u > now then za[#za + 1] = int(finished[i] + u); za[#za + 1] = ids[i] end
      end
    end
  end
  if #za > 0 then call_all('ZADD', J.u, za, 2, 'zset') end
  -- (J.dp_none: the caller found the deps hash absent, sweep_completed)
  if not J.dp_none then call_all('HDEL', J.dp, ids, 1, 'hash') end
  delete_jobs(J, ids)
end

-- The oldest `n` members of zset key (id -> time), trimmed: their records
-- are forgotten (forget_jobs) and they leave the set. A job whose
-- dependents are not all released yet (its entry in J.dt, the queue's
-- dependents hash, when the caller declares it) is skipped: its record and
-- its member stay, past the cap, so that their release (by its finisher's
-- client, or the sweep, deps_due.lua) reads how it ended, not 'missing'
-- (README "Dependencies and batches"); a later trim takes it once
-- deps_done.lua dropped its entry. The hash's type is asked once per
-- script call (J.dt_has; none, or not a hash: nothing is skipped), so a
-- queue without dependents pays one TYPE per call that trims.
local function trim_oldest(J, key, n)
  local page = redis.call('ZRANGE', key, 0, n - 1, 'WITHSCORES')
  local ids, at = {}, {}
  for i = 1, #page, 2 do ids[#ids + 1] = page[i]; at[#at + 1] = tonumber(page[i + 1]) end
  if J.dt and J.dt_has == nil then J.dt_has = redis.call('TYPE', J.dt)['ok'] == 'hash' end
  if J.dt_has and #ids > 0 then
    local have, i2, a2 = hmget(J.dt, ids), {}, {}
    for i, id in ipairs(ids) do
      if not have[i] then i2[#i2 + 1] = id; a2[#i2] = at[i] end
    end
    if #i2 < #ids then
      forget_jobs(J, i2, a2)
      if #i2 > 0 then call_all('ZREM', key, i2) end
      return
    end
  end
  forget_jobs(J, ids, at)
  redis.call('ZREMRANGEBYRANK', key, 0, n - 1)
end

-- Move job `id` (attempts spent so far) to the dead set with error text err; drop the oldest dead
-- jobs (and their records) beyond dead_max. tok: the last attempt's token
-- (nil: none), kept in its state (whose worker ran it: rjq_job_info); tm:
-- its times (the end is now).
local function bury(J, dead, stats, id, attempts, now, err, dead_max, emit, tok, tm)
  local t = int(now)
  redis.call('ZADD', dead, t, id)
  emit('dead', id)
  redis.call('HSET', J.s, id, state_value('dead', attempts, tok, times_ended(tm, t)))
  redis.call('HSET', J.e, id, err)
  redis.call('HINCRBY', stats, 'dead', 1)
  notify_finished(J, id, redis.call('HMGET', J.n, id)[1], 'dead', err)
  local extra = redis.call('ZCARD', dead) - dead_max
  if extra > 0 then trim_oldest(J, dead, extra) end
end

-- The queue a failure or a return (fail_job, return_lost) writes to, one
-- table per script call: q.ready, q.prio, q.delayed, q.dead, q.stats (its
-- keys), q.wake (its wake channel), q.now (the call's server time, ms),
-- q.jitter (in [0,1): a backoff's), q.dead_max (the dead cap), q.emit (its
-- monitor, see monitor). return_lost reads neither delayed nor jitter.

-- Attempt history (the job page): an attempt that ends by a failure or a
-- lost lease appends "<start> <end> <outcome> <token>" to the job's
-- attempts column (src/keys.def), the newest ATTEMPTS_KEPT kept; the
-- current attempt is the job's own fields. Only on those paths: a
-- completion writes nothing more. tm: the job's times (its start).
local ATTEMPTS_KEPT = 20
local function record_attempt(J, id, tm, now, outcome, tok)
  local _, s = times_split(tm)
  local rec = (s ~= '' and s or '0') .. ' ' .. int(now) .. ' ' .. outcome .. ' ' .. (tok or '-')
  local old = redis.call('HMGET', J.a, id)[1]
  if old then
    local _, seps = string.gsub(old, ';', ';')
    if seps + 1 >= ATTEMPTS_KEPT then old = string.match(old, '^[^;]*;(.*)$') end
    rec = old .. ';' .. rec
  end
  redis.call('HSET', J.a, id, rec)
end

-- A job whose holder is gone (its lease ended, or its client was found
-- dead) and that is out of the active set: the attempt it started counts
-- (it may be what killed its worker); back to the head of its class in
-- queue q (see above), or dead when its attempts are spent. err says why;
-- tok: the lost holder's token (kept on a dead record, see bury); tm: the
-- job's times.
local function return_lost(J, q, id, attempts, o, err, tok, tm)
  local emit = q.emit
  emit('reclaimed', id)
  record_attempt(J, id, tm, q.now, 'lost', tok)
  local p, max = parse_options(o)
  if attempts >= max then
    bury(J, q.dead, q.stats, id, attempts, q.now, err, q.dead_max, emit, tok, tm)
    return 'dead'
  end
  -- without the lost holder's token, which fences nothing now
  redis.call('HSET', J.s, id, state_value('ready', attempts, nil, tm))
  redis.call('HSET', J.e, id, err)
  push_ready(q.ready, q.prio, q.stats, q.wake, id, p, true)
  return 'ready'
end

-- A failure of job `id` (out of the active set; attempts: its count, o:
-- its options column) recorded as token tok (failtoken) in queue q (see
-- above): dead when fatal or its attempts are spent, else retried after
-- `delay` ms (< 0: its backoff, with q.jitter); tm: its times. Returns 1
-- retried, 2 dead; then the state it left the job in.
-- (return_lost above returns that state: 'ready' or 'dead'.)
local function fail_job(J, q, id, tok, attempts, o, err, fatal, delay, tm)
  local ready, prio, delayed, dead, stats, wake = q.ready, q.prio, q.delayed, q.dead, q.stats, q.wake
  local now, emit = q.now, q.emit
  redis.call('HSET', J.f, id, tok)
  record_attempt(J, id, tm, now, string.find(tok, ' timeout$') and 'timeout' or 'failed',
                 string.match(tok, '^%S+'))
  emit('failed', id)
  redis.call('HINCRBY', stats, 'failed', 1)
  local p, max, backoff = parse_options(o)
  if fatal or attempts >= max then
    -- (the attempt's token: tok's first word, see reclaim.lua)
    bury(J, dead, stats, id, attempts, now, err, q.dead_max, emit, string.match(tok, '^%S+'), tm)
    return 2, 'dead'
  end
  if delay < 0 then delay = backoff_ms(backoff, attempts, q.jitter) end
  redis.call('HINCRBY', stats, 'retried', 1)
  emit('retried', id)
  redis.call('HSET', J.e, id, err)
  if delay > 0 then
    redis.call('HSET', J.s, id, state_value('delayed', attempts, nil, tm))
    if push_delayed(delayed, id, now + delay) then redis.call(PUB or pub_mode(), wake, '1') end
    return 1, 'delayed'
  end
  redis.call('HSET', J.s, id, state_value('ready', attempts, nil, tm))
  push_ready(ready, prio, stats, wake, id, p, false)
  return 1, 'ready'
end

-- Dependencies in the script that finishes their dependency (issue 39,
-- bench/README.md "Dependencies"): deps_release.lua's and deps_watch.lua's
-- work as functions, so a script of the dependents' own queue does it in
-- the same call: complete.lua and fail.lua release the dependents of the
-- jobs they finish that wait in their queue (DEPS.finished; complete.lua
-- a job's one dependent waiting for it alone with DEPS.release_ones),
-- deps_add.lua registers a job with its dependencies of its queue
-- (DEPS.register_ids); the client carries only the steps
-- to other queues.
local DEPS = {}
DEPS.MARKS = {completed = 'c', dead = 'd', cancelled = 'x', missing = 'm'}

-- Count dependencies of waiting jobs of J's queue as finished: rel = { the
-- waiting job's id, the dependency's queue, its id, its outcome ('completed',
-- 'dead', 'cancelled' or 'missing'), ... }, from index `from` (default 1).
-- Q: the queue's keys ready, prio, delayed, stats, waiting, deps, dead
-- (their types checked, and stats' counters seq, skipped, dead, by the
-- caller), wake (its channel), dead_max (the dead cap), emit (monitor()).
-- Idempotent: a dependency is counted once. Returns { code, more } per
-- release: code 0 nothing changed (not waiting for it, or counted already),
-- 1 counted (others pending), 2 released (ready, or delayed by its own
-- delay), 3 buried by the policy 'fail'; more 1 when the job buried has
-- dependents of its own to release (DEPS_TOLD), else 0; then (a second
-- value) how many releases have more 1.
-- What it reads, once for all its releases (a job released twice in one
-- call sees its first release: these are kept up to date): the state (S)
-- and dependencies (L) of each job, and the options (O) of those whose
-- list's head has no priority (deps_add.lua); the writes of jobs counted
-- or released go at the end, a command each (dirty: the jobs whose list
-- changed, in order; st: their new states; rpush: the jobs made ready with
-- priority 0, in order). A job released when its last dependency
-- completed, every mark this call changed a 'c', keeps its list as it was
-- (its 'w' lines read as 'c' once it left waiting: deps_add.lua); one
-- buried by its policy gets " h" on its head (held).
function DEPS.release(J, Q, rel, from)
  local MARKS, deps = DEPS.MARKS, Q.deps
  -- (every job by its index k in uniq: K[id] = k, the one table keyed by
  -- id; S[k] and L[k] are the HMGET replies themselves, kept up to date)
  local uniq, K, nu = {}, {}, 0
  for i = from or 1, #rel, 4 do
    local id = rel[i]
    if not K[id] then nu = nu + 1; uniq[nu] = id; K[id] = nu end
  end
  local S, L = hmget(J.s, uniq), hmget(deps, uniq)
  -- (a list's head "<policy> <delay> <priority>" as deps_add.lua writes
  -- it, read once: H[k] the policy, D[k] the delay, A[k] where its first
  -- line starts (cleared when the list is rewritten), P[k] the priority)
  local P, O, H, D, A = {}, {}, {}, {}, {}
  do
    -- (the jobs of one deps_add call share their head: the last one read,
    -- hl with its newline, is compared with one plain find first)
    local old, hl, pol, dl, p, at = {}, nil, nil, nil, nil, nil
    for k = 1, nu do
      local l = L[k]
      if l then
        if not (hl and string.find(l, hl, 1, true) == 1) then
          pol, dl, p, at = string.match(l, '^(%a+) (%d+) (%-?%d+)\n()')
          if pol then hl = string.sub(l, 1, at - 1); p = tonumber(p) else hl = nil end
        end
        if pol then P[k] = p; H[k] = pol; D[k] = dl; A[k] = at else old[#old + 1] = k end
      end
    end
    if #old > 0 then
      local oids = {}
      for j, k in ipairs(old) do oids[j] = uniq[k] end
      local ov = hmget_sparse(J.o, oids)
      for j, k in ipairs(old) do O[k] = ov[j] end
    end
  end
  local dirty, is_dirty, st, gone, rpush, unlike = {}, {}, {}, {}, {}, {}
  local nst, ngone, nrpush = 0, 0, 0 -- (their lengths: #t is a search)
  -- (unlike[k]: a mark other than 'c' changed in this call, so the list is written)
  local now -- (the server's time, read once, when a job is buried or delayed)
  local function clock() now = now or now_ms(); return now end

  -- (the job's last dependency counted: ready, or delayed by its own
  -- delay; rest: its waiting state after the name, " <attempts> @<times>",
  -- which its new state keeps: state_value's text without the token)
  local last_r, last_ready -- (the ready state made last, for the same rest)
  local function finish(k, id, rest, delay)
    ngone = ngone + 1; gone[ngone] = id
    if delay ~= '0' and (tonumber(delay) or 0) > 0 then
      S[k] = 'delayed' .. rest
      st[nst + 1] = id; st[nst + 2] = S[k]; nst = nst + 2
      if push_delayed(Q.delayed, id, clock() + tonumber(delay)) then redis.call(PUB or pub_mode(), Q.wake, '1') end
    else
      if rest ~= last_r then last_r, last_ready = rest, 'ready' .. rest end
      S[k] = last_ready
      st[nst + 1] = id; st[nst + 2] = last_ready; nst = nst + 2
      local p = P[k] or (parse_options(O[k]))
      if p == 0 then nrpush = nrpush + 1; rpush[nrpush] = id else push_ready(Q.ready, Q.prio, Q.stats, Q.wake, id, p, false) end
    end
    return 2, 0
  end

  -- (the policy 'fail' met: the job buried, its new list written at once;
  -- sv: its waiting state)
  local function buried(k, id, list, sv, dq, did, outcome)
    L[k] = list; A[k] = nil
    redis.call('HSET', deps, id, list)
    is_dirty[k] = nil
    S[k] = false
    ngone = ngone + 1; gone[ngone] = id
    DEPS_TOLD[1] = false
    local _s, attempts, _t, tm = state_text(sv)
    bury(J, Q.dead, Q.stats, id, tonumber(attempts), clock(),
         'dependency ' .. dq .. ':' .. did .. (outcome == 'missing' and ' was removed (no record of it)'
                                                or ' ended ' .. outcome), Q.dead_max, Q.emit, nil, tm)
    return 3, DEPS_TOLD[1] and 1 or 0
  end

  local last_sv, last_rest -- (the jobs of one deps_add call share their state: checked once)
  local find = string.find
  local function release(id, dq, did, outcome)
    local k = K[id]
    local list, sv = L[k], S[k]
    if not sv or not list then return 0, 0 end
    -- (a waiting job's state as deps_add.lua writes it, checked with one
    -- find, no capture: what state_text gives for it; any other, through
    -- state_text)
    local rest
    if sv == last_sv then
      rest = last_rest
    elseif find(sv, '^waiting %d+ @%S*$') then
      rest = string.sub(sv, 8)
      last_sv, last_rest = sv, rest
    else
      local state, attempts, _t, tm = state_text(sv)
      if state ~= 'waiting' then return 0, 0 end
      rest = tm and ' ' .. attempts .. ' @' .. tm or ' ' .. attempts
    end
    local mark = MARKS[outcome]
    local went = 'w ' .. dq .. ' ' .. did -- (the line of this dependency while it is waited for)
    local policy, delay, at = H[k], D[k], A[k]
    if not at then policy, delay, at = string.match(list, '^(%a+) (%d+)[^\n]*\n()') end
    -- (its one line this dependency's, waited for: told by its length and
    -- one plain find, which finds no newline then)
    local one = at and #list - at + 1 == #went and find(list, went, at, true) == at
    if one or at and not find(list, '\n', at, true) then
      -- One dependency (a one-line list, deps_add.lua): no line loop, no
      -- table; a completion that releases it writes no list (P).
      if not one then return 0, 0 end
      if mark ~= 'c' then
        unlike[k] = true
        local head = string.sub(list, 1, at - 2)
        local line = (policy == 'ignore' and '-' or mark) .. string.sub(went, 2)
        if policy == 'fail' then
          if P[k] then head = head .. ' h' end -- (held: its 'w' lines stay pending)
          return buried(k, id, head .. '\n' .. line, sv, dq, did, outcome)
        end
        L[k] = head .. '\n' .. line; A[k] = nil
        if not is_dirty[k] then is_dirty[k] = true; dirty[#dirty + 1] = k end
      elseif not P[k] then
        L[k] = string.sub(list, 1, at - 1) .. 'c' .. string.sub(went, 2); A[k] = nil
        if not is_dirty[k] then is_dirty[k] = true; dirty[#dirty + 1] = k end
      end
      return finish(k, id, rest, delay)
    end
    local head
    head, at = string.match(list, '^([^\n]*)\n()')
    if not head then return 0, 0 end
    policy, delay = string.match(head, '^(%a+) (%d+)')
    local entry = string.sub(went, 2)
    local lines, found, pending = {head}, false, 0
    for line in string.gmatch(string.sub(list, at), '[^\n]+') do
      if line == went then -- (every line of it: a dependency listed twice)
        found = true
        if mark ~= 'c' and policy == 'ignore' then line = '-' .. entry else line = mark .. entry end
        if mark ~= 'c' then unlike[k] = true end
      elseif string.sub(line, 1, 1) == 'w' then
        pending = pending + 1
      end
      lines[#lines + 1] = line
    end
    if not found then return 0, 0 end
    if mark ~= 'c' and policy == 'fail' then
      if P[k] then lines[1] = head .. ' h' end -- (held: its 'w' lines stay pending)
      return buried(k, id, table.concat(lines, '\n'), sv, dq, did, outcome)
    end
    L[k] = table.concat(lines, '\n'); A[k] = nil
    if not is_dirty[k] then is_dirty[k] = true; dirty[#dirty + 1] = k end
    if pending > 0 then return 1, 0 end
    if P[k] and not unlike[k] then is_dirty[k] = nil end -- (all completed: not written)
    return finish(k, id, rest, delay)
  end

  local out, n, told = {}, 0, 0
  for i = from or 1, #rel, 4 do
    local code, more = release(rel[i], rel[i + 1], rel[i + 2], rel[i + 3])
    out[n + 1] = code
    out[n + 2] = more
    n = n + 2
    told = told + more
  end
  local fv = {}
  for _, k in ipairs(dirty) do
    if is_dirty[k] then fv[#fv + 1] = uniq[k]; fv[#fv + 1] = L[k] end
  end
  if #fv > 0 then call_all('HSET', deps, fv, 2) end
  if nst > 0 then call_all('HSET', J.s, st, 2) end
  if ngone > 0 then call_all('ZREM', Q.waiting, gone) end
  if #rpush > 0 then
    -- (as push_ready: the doorbell when the queue had nothing ready)
    local n = 0
    for i = 1, #rpush, CHUNK do n = redis.call('RPUSH', Q.ready, unpack(rpush, i, math.min(i + CHUNK - 1, #rpush))) end
    if n == #rpush and redis.call('ZCARD', Q.prio) == 0 then redis.call(PUB or pub_mode(), Q.wake, '1') end
  end
  return out, told
end

-- Register dependents with jobs of J's queue (deps_watch.lua): regs = { the
-- job's id, the dependent's queue, the dependent's id, ... } (the types of
-- J.d, J.s and dependents checked by the caller). Race-free like
-- watch.lua: a job that has finished is answered from its state at once
-- (the caller then counts it, DEPS.release); one still unfinished records
-- the dependent in its dependents entry, so the script that finishes it
-- has its dependents released: the entry is what every finishing script
-- reads (complete.lua when its queue has entries, notify_finished with
-- J.dt), for dependents of any queue and batches alike, so nothing is
-- written among the job's watchers (a job registered before depoq may
-- still hold the mark DEPS_MARK there, which the finishing scripts still
-- read: notify). Idempotent: a dependent registered twice is recorded
-- once. Returns per registration the outcome so far: 'waiting'
-- (registered), 'completed', 'dead', 'cancelled', or 'missing' (no such
-- job). DEPS.register_ids does the work (deps_add.lua calls it too).
function DEPS.register(J, dependents, regs)
  local ids, entries = {}, {}
  for i = 1, #regs, 3 do
    ids[#ids + 1] = regs[i]
    entries[#entries + 1] = regs[i + 1] .. ' ' .. regs[i + 2]
  end
  return DEPS.register_ids(J, dependents, ids, entries)
end

-- DEPS.register's registrations as two lists: ids[k] the job's id,
-- entries[k] its dependent's line in the job's dependents entry,
-- "<dependent's queue> <dependent's id>" (deps_add.lua: the jobs of its
-- call with dependencies of its own queue, read after its writes).
-- Returns per registration its outcome, as DEPS.register.
function DEPS.register_ids(J, dependents, ids, entries)
  -- (the pin asked with the entries: one argument more, have[n + 1])
  local n = #ids
  local s = hmget(J.s, ids)
  ids[n + 1] = DEPENDENTS_PIN
  local have = hmget(dependents, ids)
  ids[n + 1] = nil
  -- fv: the HSET's fields and values, built as the registrations are
  -- read (the pin first, when the hash lacks it: the HSET makes the hash
  -- a table before it writes an entry, even in chunks). A job without an
  -- entry (have[k] false: the usual case) gets its line as it comes, no
  -- table write more; nnew counts them (and the pin), what the HSET must
  -- add: fewer added means a job came twice among them, and fv is built
  -- again by `merged` (below) and written over. A job with an entry goes
  -- through add_line (below) and at[id]: the index in fv of the job's
  -- entry to write, none while its entry as read holds every line given
  -- so far (nothing to write for it); the same job twice reads the same
  -- entry, so both go that way.
  local out, stale, at = {}, {}, {}
  local fv = have[n + 1] and {} or {DEPENDENTS_PIN, ''}
  local pinned = #fv
  local nf, nnew = pinned, pinned / 2
  local waiting = {} -- (the k of each registration answered 'waiting', for merged)
  local nw = 0
  local last_sv, last_state -- (jobs of one enqueue call share their state string: read once)
  -- The line entry of job id added to its entry in f (fields and values,
  -- nf of them; a[id]: its entry's index in f once written), its entry
  -- as read being l (nil: none): nothing when it holds the line already.
  -- Returns the new nf.
  local function add_line(f, a, nf, id, entry, l)
    local j = a[id]
    if j then l = f[j] end
    if not l then
      nf = nf + 2; f[nf - 1] = id; f[nf] = entry; a[id] = nf
    elseif not string.find('\n' .. l .. '\n', '\n' .. entry .. '\n', 1, true) then
      if j then f[j] = l .. '\n' .. entry
      else nf = nf + 2; f[nf - 1] = id; f[nf] = l .. '\n' .. entry; a[id] = nf end
    end
    return nf
  end
  for k, id in ipairs(ids) do
    -- (the state's name alone, as state_text reads it)
    local sv, state = s[k], last_state
    if sv ~= last_sv then
      state = sv and (string.match(sv, '^(%a+) %d') or sv)
      last_sv, last_state = sv, state
    end
    if not s[k] and redis.call('HEXISTS', J.d, id) == 0 then
      out[k] = 'missing'
      if have[k] then stale[#stale + 1] = id end
    elseif state == 'completed' or state == 'dead' or state == 'cancelled' then
      out[k] = state
    else
      out[k] = 'waiting'
      nw = nw + 1; waiting[nw] = k
      if not have[k] then
        nf = nf + 2; fv[nf - 1] = id; fv[nf] = entries[k]; nnew = nnew + 1
      else
        nf = add_line(fv, at, nf, id, entries[k], have[k])
      end
    end
  end
  -- (a job without an entry named twice: its lines merged, as a job with
  -- one; the HSET below writes every such field again, over the first)
  local function merged()
    local fv2, at2, nf2 = {}, {}, 0
    for m = 1, nw do
      local k = waiting[m]
      nf2 = add_line(fv2, at2, nf2, ids[k], entries[k], have[k])
    end
    return fv2
  end
  if nf > pinned then
    local added = 0
    for c = 1, nf, 2 * CHUNK do
      added = added + typed(nil, 'HSET', dependents, unpack(fv, c, math.min(c + 2 * CHUNK - 1, nf)))
    end
    if added < nnew then call_all('HSET', dependents, merged(), 2) end
  end
  if #stale > 0 then DEPS.forget(dependents, stale) end
  return out
end

-- HDEL of the entries ids of the dependents hash (refused on a wrongly
-- typed key, as call_all), the hash deleted when only DEPENDENTS_PIN is
-- left: a queue without entries has no dependents key, which the
-- completions' EXISTS probes read (complete.lua, complete_one.lua,
-- monitor_and_dependents). A hash whose entries an older client removed
-- keeps its pin until the next removal here; meanwhile those probes take
-- the dependents path and find no entry (correct, an HMGET more a call).
function DEPS.forget(dependents, ids)
  call_all('HDEL', dependents, ids)
  -- (one field left: the pin's HDEL deletes the hash when it is the pin,
  -- and changes nothing when it is an entry: a hash an older client made)
  if redis.call('HLEN', dependents) == 1 then redis.call('HDEL', dependents, DEPENDENTS_PIN) end
end

-- The name of J's queue, from its job name prefix "<prefix>:{Q}:job:"
-- (queue.c; no queue name has a brace): what the dependents entries of its
-- own jobs say.
function DEPS.queue(J)
  return J.prefix and string.match(J.prefix, ':{([^{}]*)}:job:$')
end

-- Whether the keys a release in J's queue writes (Q: as DEPS.finished) hold
-- their types and stats' counters are integers: deps_release.lua's checks,
-- their refusal caught (nothing is counted in the caller then). Asked once
-- per call: the answer is kept in Q.ok.
function DEPS.writable(J, Q)
  if Q.ok == nil then
    local spec = {Q.ready, 'list', Q.prio, 'zset', Q.delayed, 'zset', Q.waiting, 'zset', Q.deps, 'hash',
                  J.o, 'hash'}
    if Q.dead then spec[13] = Q.dead; spec[14] = 'zset'; spec[15] = J.e; spec[16] = 'hash' end
    Q.ok = (pcall(function() expect_types(spec); int_fields(Q.stats, 'seq', 'skipped', 'dead') end))
  end
  return Q.ok
end

-- The dependents of jobs ids of J's queue, which this script just finished
-- (`outcome`; DEPS_TOLD said they have some): those that wait in this
-- queue (entry lines naming it) are counted here (DEPS.release), and their
-- lines leave the dependents entries; the rest (other queues, batches)
-- stay for the client (deps.c), the job indexed in depsfin for the sweep
-- until deps_done.lua. A job buried by its policy 'fail' with dependents
-- of its own is taken next, as 'dead' (its lines of other queues left for
-- the sweep). When a key the release writes holds a wrong type (or a
-- counter is no integer), nothing is counted here: the client's
-- deps_release.lua refuses it, as before. Q: as DEPS.release, with
-- dependents and depsfin (dead and dead_max only for an outcome other than
-- 'completed': a completed dependency buries nothing; depsfinc only for
-- 'completed'). Returns { id, entry
-- left ('' none) } per job of ids, in order, then { id, entry left, ... }
-- of the jobs the cascade buried that have an entry left (dependents of
-- other queues: the caller's reply carries them, as its own jobs', so the
-- client releases them at once, not the sweep a period later). known (may
-- be nil): the dependents entries of ids as the caller read them (false
-- for none), not read again.
function DEPS.finished(J, Q, ids, outcome, known)
  local here, ok = DEPS.queue(J), nil
  -- (an entry line "<this queue> <id>": the queue's name as a pattern, once)
  local mine_pat = here and '^' .. string.gsub(here, '%p', '%%%0') .. ' (%S+)$'
  local function writable() -- (asked once, when a line names this queue)
    return DEPS.writable(J, Q)
  end
  -- Rounds: the jobs ids, then those the policy 'fail' buried in the
  -- round before (their dependents of this queue next); each round's
  -- releases in one DEPS.release, its writes a command each.
  local out, buried, round, oc, first = {}, {}, ids, outcome, true
  local match, find = string.match, string.find
  -- a completion call: every job of it left indexed (the cascade's burials
  -- too) goes in one member, written after the rounds (DEPSFIN_MEMBER: in
  -- depsfinc when it has several ids), the burials' own one-id members
  -- (notify_finished) removed
  local group, gidx = outcome == 'completed', {}
  while #round > 0 do
    -- (known: as the caller read them; a wrongly typed hash gives no
    -- entries: the sweep's deps_due.lua refuses it)
    local lists = known or try_all('HMGET', Q.dependents, round)
    local rel, left, drop, keep, index, unindex = {}, {}, {}, {}, {}, {}
    local nrel, ndrop = 0, 0 -- (per-job appends with a counter: #t is a search)
    for k = 1, #round do
      local id, list, rest, mine = round[k], lists[k], nil, 0
      -- (one dependent of this queue, matched first with the id its one
      -- capture: no line loop, no table; a multi-line entry fails it)
      local did = list and mine_pat and match(list, mine_pat)
      if did or list and here and not find(list, '\n', 1, true) then
        if did and ok == nil then ok = writable() end
        if did and ok then
          rel[nrel + 1] = did; rel[nrel + 2] = here; rel[nrel + 3] = id; rel[nrel + 4] = oc
          nrel = nrel + 4
          mine = 1
        end
      elseif list and here then
        rest = {}
        for line in string.gmatch(list, '[^\n]+') do
          local qn, did = string.match(line, '^(%S+) (%S+)$')
          if qn == here and ok == nil then ok = writable() end
          if qn == here and ok then
            rel[nrel + 1] = did; rel[nrel + 2] = here; rel[nrel + 3] = id; rel[nrel + 4] = oc
            nrel = nrel + 4
            mine = mine + 1
          else
            rest[#rest + 1] = line
          end
        end
      end
      local l = list or ''
      if mine > 0 then
        l = rest and table.concat(rest, '\n') or ''
        if l ~= '' then keep[#keep + 1] = id; keep[#keep + 1] = l else ndrop = ndrop + 1; drop[ndrop] = id end
      end
      left[k] = l
      if group then
        if l ~= '' then gidx[#gidx + 1] = id end
        if oc ~= 'completed' then unindex[#unindex + 1] = id end -- (its burial indexed it alone)
      elseif l ~= '' then index[#index + 1] = id
      elseif oc ~= 'completed' then unindex[#unindex + 1] = id end -- (its burial indexed it)
    end
    local nextr = {}
    if nrel > 0 then
      local r, more = DEPS.release(J, Q, rel)
      if more > 0 then
        for j = 2, #r, 2 do
          if r[j] == 1 then nextr[#nextr + 1] = rel[2 * j - 3] end -- buried, with dependents of its own
        end
      end
      if #drop > 0 then DEPS.forget(Q.dependents, drop) end
      if #keep > 0 then call_all('HSET', Q.dependents, keep, 2) end
    end
    -- indexed for the sweep while dependents of other queues are left
    -- (deps_done.lua drops them); a wrongly typed index: deps_due refuses it
    if #index > 0 then
      local t, sv = DEPSFIN_SCORE(), {} -- (as text: once, not per job)
      -- (in descending order: each goes in at the head of its score's
      -- run, before the one sent before it: DEPSFIN_SCORE)
      table.sort(index)
      for k = #index, 1, -1 do sv[#sv + 1] = t; sv[#sv + 1] = index[k] end
      try_all('ZADD', Q.depsfin, sv, 2)
    end
    if #unindex > 0 then try_all('ZREM', Q.depsfin, unindex) end
    if first then
      for k = 1, #round do out[2 * k - 1] = round[k]; out[2 * k] = left[k] end
    else
      for k = 1, #round do
        if left[k] ~= '' then buried[#buried + 1] = round[k]; buried[#buried + 1] = left[k] end
      end
    end
    round, oc, first, known = nextr, 'dead', false, nil
  end
  -- (a wrongly typed index: deps_due refuses it; one id: the form every
  -- version reads, in depsfin; several: depsfinc, which older sweeps never
  -- read: DEPSFIN_MEMBER)
  if #gidx == 1 then
    redis.pcall('ZADD', Q.depsfin, DEPSFIN_SCORE(), gidx[1])
  elseif #gidx > 1 then
    redis.pcall('ZADD', Q.depsfinc, DEPSFIN_SCORE(), DEPSFIN_MEMBER(gidx))
  end
  return out, buried
end

-- The one-dependent release in the completion's own call (complete.lua,
-- before its loop over the jobs done): of the jobs gone, just completed,
-- each whose dependents entry (ent[j], as complete.lua read it) is one
-- dependent of this queue, waiting for this job alone (its list one line,
-- "w <queue> <job>", under a head "<policy> <delay> <priority>", its state
-- "waiting <attempts> @<times>" as deps_add.lua writes them), is released
-- here: made ready (or delayed by its own delay) in its state, out of
-- waiting, into ready (RPUSH; the prio set by its priority), the entry
-- deleted; ent[j] is set false (the loop then sees no dependents: code 1).
-- The completed mark is its only dependency's, so its policy plays no part
-- and its list is not written (DEPS.release's "all completed" case: its
-- 'w' line reads as 'c' once it left waiting). Anything else (several
-- lines, another queue, an older list head, a held job, a state not
-- waiting, a dependent named twice) is left in ent for DEPS.finished, as
-- before; so is everything when a key the release writes holds a wrong
-- type (DEPS.writable: nothing is written here then). Q: as
-- DEPS.finished. Returns how many were released, and how many entries
-- are left in ent (not false: the caller's loop over the jobs done has
-- dependents to tell only when some are; complete.lua skips it otherwise).
function DEPS.release_ones(J, Q, gone, ent)
  local here = DEPS.queue(J)
  local nent = 0 -- (the entries in ent: none left, nothing for the caller to tell)
  local find, sub = string.find, string.sub
  if not here then
    for j = 1, #gone do if ent[j] then nent = nent + 1 end end
    return 0, nent
  end
  local hp = here .. ' '
  local from = #hp + 1
  local cj, cd, nc = {}, {}, 0 -- (the candidates: their j, their dependent's id)
  for j = 1, #gone do
    local e = ent[j]
    if e then
      nent = nent + 1
      if find(e, hp, 1, true) == 1 and not find(e, '\n', from, true) then
        nc = nc + 1; cj[nc] = j; cd[nc] = sub(e, from)
      end
    end
  end
  if nc == 0 or not DEPS.writable(J, Q) then return 0, nent end
  local S, L = hmget(J.s, cd), hmget(Q.deps, cd)
  local st, ids, rpush, dl, seen = {}, {}, {}, {}, {}
  local nst, nids, nrp = 0, 0, 0
  local last_sv, last_rest, last_hl, last_hw, last_delay, last_p, last_r, last_ready
  local now
  for c = 1, nc do
    local did, sv, l = cd[c], S[c], L[c]
    local rest
    if sv and sv == last_sv then
      rest = last_rest
    elseif sv and find(sv, '^waiting %d+ @%S*$') then
      rest = sub(sv, 8)
      last_sv, last_rest = sv, rest
    end
    -- (its list "<head>\nw <this queue> <the job done>": compared whole
    -- with the last head's text made once, last_hw, one concatenation
    -- and a comparison; another head parsed and checked as it is read)
    local delay, p
    if rest and l and not seen[did] then
      local gid = gone[cj[c]]
      if last_hw and l == last_hw .. gid then
        delay, p = last_delay, last_p
      else
        local at = find(l, '\n', 1, true)
        local went = at and 'w ' .. hp .. gid
        if at and #l - at == #went and find(l, went, at + 1, true) == at + 1 then
          if last_hl and at == #last_hl and find(l, last_hl, 1, true) == 1 then
            delay, p = last_delay, last_p
          else
            local d, q = string.match(l, '^%a+ (%d+) (%-?%d+)\n')
            if d then
              last_hl, last_delay, last_p = sub(l, 1, at), tonumber(d), tonumber(q)
              last_hw = last_hl .. 'w ' .. hp
              delay, p = last_delay, last_p
            end
          end
        end
      end
    end
    if delay then
      seen[did] = true
      ent[cj[c]] = false
      nids = nids + 1; ids[nids] = did; dl[nids] = gone[cj[c]]
      local v
      if delay > 0 then
        v = 'delayed' .. rest
        now = now or now_ms()
        if push_delayed(Q.delayed, did, now + delay) then redis.call(PUB or pub_mode(), Q.wake, '1') end
      else
        if rest ~= last_r then last_r, last_ready = rest, 'ready' .. rest end
        v = last_ready
        if p == 0 then nrp = nrp + 1; rpush[nrp] = did
        else push_ready(Q.ready, Q.prio, Q.stats, Q.wake, did, p, false) end
      end
      st[nst + 1] = did; st[nst + 2] = v; nst = nst + 2
    end
  end
  if nids == 0 then return 0, nent end
  call_all('HSET', J.s, st, 2)
  call_all('ZREM', Q.waiting, ids)
  if nrp > 0 then
    -- (as push_ready: the doorbell when the queue had nothing ready)
    local n = 0
    for i = 1, nrp, CHUNK do n = redis.call('RPUSH', Q.ready, unpack(rpush, i, math.min(i + CHUNK - 1, nrp))) end
    if n == nrp and redis.call('ZCARD', Q.prio) == 0 then redis.call(PUB or pub_mode(), Q.wake, '1') end
  end
  DEPS.forget(Q.dependents, dl)
  return nids, nent - nids
end

-- Add the jobs ids, completed at `stamp`, to the retention index (one
-- entry per call: cheaper than a sorted-set member per job); the caller
-- counts them (stats field retained). Through u (undoable()): the push
-- checks the index's type, undone by removing the entry from the tail
-- again (LREM -1: a command every role that completes has already).
local function index_completed(completed, stamp, ids, u)
  local entry = stamp .. ' ' .. table.concat(ids, ' ')
  u.call('list', function()
    return function() redis.call('LREM', completed, -1, entry) end
  end, 'RPUSH', completed, entry)
end

-- Count n more completed jobs in the retention index (stats field
-- retained) and return the new count: through u (undoable()) as a call's
-- first write, which checks the hash's type and the field's value. The
-- undo is exact because the count is never stored as 0 (the sweep
-- deletes the field instead): a reply of n means the field was absent.
local function count_retained(stats, n, u)
  return u.call('hash', function(r)
    if r == n then return function() redis.call('HDEL', stats, 'retained') end end
    return function() redis.call('HINCRBY', stats, 'retained', -n) end
  end, 'HINCRBY', stats, 'retained', num(n))
end

-- Retention is applied in batches: past the count cap, a sweep deletes
-- down to `slack` below it (caps of 64 jobs or more: 1/64 of the cap, at
-- most 64; smaller caps are kept exactly), and for the age limit a
-- completion call looks at the oldest entry only when its jobs take the
-- index past a multiple of 64. So one look and one batch of deletions
-- serve ~64 jobs instead of one call; a record past its time waits at
-- most for those 64 completions, or for the workers' reclaim sweep.
local SWEEP_EVERY = 64

local function cap_slack(cap)
  return math.min(SWEEP_EVERY, math.floor(cap / SWEEP_EVERY))
end

-- Whether a completion call that took the index (completed) from kept -
-- added to kept ids must sweep, asked before the call writes: past the
-- cap, or, at its look for the age limit, when the oldest entry (the
-- call's own, while the index is empty) is past the retention, so that
-- the sweep will delete (the caller then checks every column's type).
local function sweep_due(completed, kept, added, retention, cap, now)
  if cap > 0 and kept > cap then return true end
  if retention < 0 or math.floor(kept / SWEEP_EVERY) == math.floor((kept - added) / SWEEP_EVERY) then
    return false
  end
  local head = redis.call('LINDEX', completed, '0')
  return (head and tonumber(string.match(head, '^%d+')) or now) <= now - retention
end

-- The lean pair's undo (enqueue_one.lua, complete_one.lua; docs/scripts.md
-- "The lean pair"): undoable()'s promise (a write refused for its key's
-- type undoes the call's earlier writes, newest first, and refuses the
-- call with nothing written) without its tables and closures per call:
-- these run only when a write is refused or not exactly undoable.
-- A write's error e (redis.pcall's reply) on key, which rjq expects to
-- hold want (nil: e as it is), refused as u.call refuses it.
local function lean_refuse(e, key, want)
  if want and string.sub(e.err, 1, 9) == 'WRONGTYPE' then expect_types({key, want}) end
  error(e)
end

-- enqueue_one.lua's first w exact writes undone, newest first: 1 the
-- counter (seq: its reply), 2 the payload, 3 the state, 4 the lease (zr:
-- its ZADD's reply).
local function enqueue_one_undo(w, stats, seq, id, pcol, scol, active, zr)
  if w >= 4 then
    if zr == 2 then redis.call('ZREM', active, id, ACTIVE_PIN) else redis.call('ZREM', active, id) end
  end
  if w >= 3 then redis.call('HDEL', scol, id) end
  if w >= 2 then redis.call('HDEL', pcol, id) end
  if seq == 1 then redis.call('HDEL', stats, 'seq') else redis.call('HINCRBY', stats, 'seq', -1) end
end

-- enqueue_one.lua's write refused (x: its redis.pcall error reply) on
-- key, which rjq expects to hold want: its first w exact writes undone
-- (enqueue_one_undo; w 0: none), then refused as lean_refuse refuses it.
-- (The caller tests x first: nothing is called while writes succeed.)
local function enqueue_one_refuse(x, key, want, w, stats, seq, id, pcol, scol, active, zr)
  if w > 0 then enqueue_one_undo(w, stats, seq, id, pcol, scol, active, zr) end
  lean_refuse(x, key, want)
end

-- enqueue_one.lua, when a write's undo is not exact (its field was there:
-- behind rjq's back) or before a renumbering: the keys it writes after
-- the counter checked by TYPE (active and wcol: false when not written),
-- its w exact writes undone when one is wrongly typed. Returns 0 (the
-- writes from here on are not undone).
local function enqueue_one_check(w, stats, seq, id, pcol, scol, active, wcol, zr)
  local spec = {pcol, 'hash', scol, 'hash'}
  if active then spec[#spec + 1] = active; spec[#spec + 1] = 'zset' end
  if wcol then spec[#spec + 1] = wcol; spec[#spec + 1] = 'hash' end
  local ok, e = pcall(expect_types, spec)
  if not ok then
    enqueue_one_undo(w, stats, seq, id, pcol, scol, active, zr)
    error(e, 0) -- (as u.guard: pcall may hand over the error as text)
  end
  return 0
end

-- complete_one.lua's writes undone, newest first: the result (rcol, id;
-- nil: not written, or not exactly), the retention index entry (nil: not
-- written), the count of retained jobs (kept: its reply).
local function complete_one_undo(stats, kept, completed, entry, rcol, id)
  if rcol then redis.call('HDEL', rcol, id) end
  if entry then redis.call('LREM', completed, -1, entry) end
  if kept == 1 then redis.call('HDEL', stats, 'retained') else redis.call('HINCRBY', stats, 'retained', -1) end
end

-- Retention: delete the records of completed jobs, oldest entry of the
-- index first, while the entry is older than `retention` ms (-1: no age
-- limit) or more than `cap` jobs are kept (<= 0: no count limit; past it,
-- down to cap_slack below it), until about `budget` records went. Whole
-- entries go, so a little less may remain. kept: the number of ids in the
-- index when the caller knows it (nil: read it).
local function sweep_completed(J, completed, stats, retention, cap, now, budget, kept)
  -- (forget_jobs writes them; checked before this sweep's writes: a deps
  -- hash found absent, no job of the queue waited for dependencies, so
  -- forget_jobs sends no HDEL there)
  expect_types({J.u, 'zset'})
  local t = redis.call('TYPE', J.dp)['ok']
  if t ~= 'none' and t ~= 'hash' then
    error({err = 'WRONGTYPE ' .. J.dp .. ' holds a ' .. t .. ', rjq expects a hash'})
  end
  J.dp_none = t == 'none'
  kept = kept or int_fields(stats, 'retained', 'swept')[1] or 0
  local limit = cap
  if cap > 0 and kept > cap then limit = cap - cap_slack(cap) end
  local old, at, empty = {}, {}, false
  while #old < budget do
    local head = redis.call('LINDEX', completed, '0')
    if not head then empty = true; break end
    local stamp = tonumber(string.match(head, '^%d+'))
    if not ((retention >= 0 and stamp <= now - retention) or (cap > 0 and kept - #old > limit)) then break end
    redis.call('LPOP', completed)
    for id in string.gmatch(head, ' (%S+)') do old[#old + 1] = id; at[#old] = stamp end
  end
  -- A job whose dependents are not all released yet keeps its record
  -- (rjq.h "Dependencies": their release, by its finisher or the sweep,
  -- reads how it ended): indexed again, as completed now. J.dt: the
  -- queue's dependents hash (deps_watch.lua) when the caller declares it.
  -- (after the caller's writes: a wrongly typed hash keeps nothing)
  if J.dt and #old > 0 and redis.call('EXISTS', J.dt) == 1 and redis.call('TYPE', J.dt)['ok'] == 'hash' then
    local have, o2, a2, keep = hmget(J.dt, old), {}, {}, {}
    for i, id in ipairs(old) do
      if have[i] then keep[#keep + 1] = id else o2[#o2 + 1] = id; a2[#o2] = at[i] end
    end
    if #keep > 0 then
      redis.call('RPUSH', completed, int(now) .. ' ' .. table.concat(keep, ' '))
      old, at, empty = o2, a2, false
    end
  end
  -- (a count of 0 is deleted, not stored: see count_retained)
  if empty and kept ~= #old then
    -- the index is empty: so is the count (completed stays: its ids count
    -- as swept)
    redis.call('HDEL', stats, 'retained')
    redis.call('HINCRBY', stats, 'swept', kept)
  elseif #old > 0 then
    if redis.call('HINCRBY', stats, 'retained', -#old) == 0 then redis.call('HDEL', stats, 'retained') end
    redis.call('HINCRBY', stats, 'swept', #old)
  end
  forget_jobs(J, old, at)
end

-- Push ids (priority 0) to the tail of ready.
local function rpush_all(ready, ids)
  call_all('RPUSH', ready, ids)
end


-- Up to `want` ready ids in claim order (strict priority: positive
-- priorities, then priority 0 FIFO, then negative): the ids, how many of
-- them came from prio first (nhi) and from the head of ready (nplain; the
-- rest came from prio), and the size of prio. The ids of ready are taken
-- (LPOP with a count: each id enters Lua once, where a read and a later
-- LPOP made it twice); those of prio are only read. Its commands check
-- the type of prio, and of ready unless prio alone filled `want` (typed:
-- a refused LPOP writes nothing), so a script that calls it before its
-- first other write needs no TYPE for those. unready() then takes the
-- prio ids; a call refused before it wrote anything else puts the ready
-- ids back with reready() (the LPOP is its only write then).
local function peek_ready(ready, prio, want, np)
  local ids, nplain = {}, 0
  if want <= 0 then return ids, 0, 0, 0 end
  np = np or typed('zset', 'ZCARD', prio) -- (np: the caller knows prio is empty)
  -- (counts go as text: see now_stamp)
  if np > 0 then ids = redis.call('ZRANGEBYSCORE', prio, '-inf', '(0', 'LIMIT', '0', num(want)) end
  local nhi = #ids
  if #ids < want then
    local plain = typed('list', 'LPOP', ready, num(want - #ids)) or {} -- (false: ready was empty)
    nplain = #plain
    for i = 1, nplain do ids[nhi + i] = plain[i] end
  end
  if #ids < want and np > nhi then
    local low = redis.call('ZRANGEBYSCORE', prio, '0', '+inf', 'LIMIT', '0', num(want - #ids))
    for i = 1, #low do ids[#ids + 1] = low[i] end
  end
  return ids, nhi, nplain, np
end

-- Take the ids peek_ready() found off prio (those of ready it took
-- itself; the commands of take_ready: no role of `rjq acl` needs another).
local function unready(ready, prio, ids, nhi, nplain)
  if #ids > nplain then
    local p = {}
    for i = 1, nhi do p[i] = ids[i] end
    for i = nhi + nplain + 1, #ids do p[#p + 1] = ids[i] end
    redis.call('ZREM', prio, unpack(p))
  end
end

-- Put the ids peek_ready() took off ready back at its head, in their
-- order (a call refused after it: nothing lost, nothing reordered).
local function reready(ready, ids, nhi, nplain)
  if nplain == 0 then return end
  local back = {}
  for i = 1, nplain do back[i] = ids[nhi + nplain + 1 - i] end -- (LPUSH puts the last first)
  redis.call('LPUSH', ready, unpack(back))
end

-- Take up to `want` ready ids in claim order, as peek_ready() and
-- unready() do, in fewer calls (a producer's push, from_ready, which has
-- no LRANGE in its role).
-- keep (may be nil): a table this call fills with where the ids were, for
-- a push heard by nobody to put them back (put_back): keep.plain, the ids
-- taken off the head of ready, in order; keep.scored, id and score of
-- each taken off prio (the scores read with it: WITHSCORES, ZPOPMIN's).
local function take_ready(ready, prio, want, keep)
  local ids = {}
  if want <= 0 then return ids end
  local scored = keep and {}
  if redis.call('ZCARD', prio) > 0 then
    if keep then
      local hi = redis.call('ZRANGEBYSCORE', prio, '-inf', '(0', 'WITHSCORES', 'LIMIT', 0, want)
      for i = 1, #hi, 2 do ids[#ids + 1] = hi[i]; scored[i] = hi[i + 1]; scored[i + 1] = hi[i] end
    else
      ids = redis.call('ZRANGEBYSCORE', prio, '-inf', '(0', 'LIMIT', 0, want)
    end
    if #ids > 0 then redis.call('ZREM', prio, unpack(ids)) end
  end
  local plain = {}
  if #ids < want then
    local got = redis.call('LPOP', ready, want - #ids)
    if got then
      plain = got
      for _, id in ipairs(got) do ids[#ids + 1] = id end
    end
  end
  if #ids < want and redis.call('ZCARD', prio) > 0 then
    local low = redis.call('ZPOPMIN', prio, want - #ids)
    for i = 1, #low, 2 do
      ids[#ids + 1] = low[i]
      if keep then scored[#scored + 1] = low[i + 1]; scored[#scored + 1] = low[i] end
    end
  end
  if keep then keep.plain, keep.scored = plain, scored end
  return ids
end

-- Put back what take_ready took (keep: its record), each where it was:
-- ready's ids at its head in their order (reready), prio's with their
-- scores.
local function put_back(ready, prio, keep)
  if #keep.scored > 0 then redis.call('ZADD', prio, unpack(keep.scored)) end
  reready(ready, keep.plain, 0, #keep.plain)
end

-- The records of jobs ids that start_jobs needs: payloads, options and
-- states (parallel to ids; false where absent). Without payloads
-- (no_payload), d is nil: see start_jobs.
-- The reads check the columns' types (typed). no_options: the caller knows
-- the options column does not exist (no job has options: none read).
local function load_jobs(J, ids, no_payload, no_options)
  return not no_payload and hmget(J.d, ids, 'hash') or nil, no_options and {} or hmget_sparse(J.o, ids, 'hash'),
         hmget(J.s, ids, 'hash')
end

-- The held index (zset `held`, every score 0): one member per claim call
-- or push message that started jobs, "<token> <id> <id> ...". Tokens are
-- "<client>.<worker>.<unique>" (the client's id, its worker's number in the
-- queue), so what one token, one worker or one client holds is a lex
-- range of the index, found in O(log n) without scanning the active set:
--   - a claim re-sent after its reply was lost finds the jobs it started
--     (claim.lua), so no attempt is spent by a lost reply;
--   - a worker whose push channel was resubscribed finds the jobs pushed
--     to it that it never heard of (recover_jobs);
--   - the jobs of a client found dead go back to the queue at once
--     (orphans.lua), without waiting for their leases.
-- A member is only a pointer: each of its jobs counts only while its state
-- is still "active <attempts> <token>". The holder removes its member once
-- no job of the token is with it any more (forget: complete.lua, forget.lua);
-- the orphan sweep removes a dead client's.

-- The index keeps this member (never in a token's range: tokens start with
-- a letter or digit) so Redis stores it as a skiplist from its first
-- member on, as the active set's pin does: one-job pushes make members
-- shorter than zset-max-listpack-value, and a listpack makes every ZADD
-- and ZREMRANGEBYLEX a scan of the whole set.
local HELD_PIN = '~ rjq: keeps this set a skiplist (longer than zset-max-listpack-value)'

-- The lex range of the members under token prefix p: an exact token when
-- p ends in a space, a worker's or a client's when it ends in '.'.
local function held_range(p)
  return '[' .. p, '(' .. string.sub(p, 1, -2) .. string.char(string.byte(p, -1) + 1)
end

-- Members of held under token prefix p (at most limit; nil: all).
local function held_members(held, p, limit)
  local lo, hi = held_range(p)
  if limit then return redis.call('ZRANGEBYLEX', held, lo, hi, 'LIMIT', 0, limit) end
  return redis.call('ZRANGEBYLEX', held, lo, hi)
end

-- Drop the members of the given tokens (their holder has none of their jobs).
local function forget(held, tokens, first)
  for i = first or 1, #tokens do
    local lo, hi = held_range(tokens[i] .. ' ')
    redis.call('ZREMRANGEBYLEX', held, lo, hi)
  end
end

-- A member's token and ids.
local function held_split(m)
  local ids, tok = {}, nil
  for w in string.gmatch(m, '%S+') do
    if tok then ids[#ids + 1] = w else tok = w end
  end
  return tok, ids
end

-- The jobs active under a token with prefix p ("<client>.<worker>." or
-- "<client>."), but for tokens in skip and ids in seen (may be nil): what
-- pushes started, which have no member in the held index (push_to_idle).
-- A scan of active (every member: it holds the running jobs, bounded by
-- the workers' total concurrency) with the states read CHUNK at a time;
-- for the rare paths only (a recovering claim, the orphan sweep). Returns
-- the tokens in the order found and, per token, its ids. (Jobs of older
-- clients, whose pushes wrote held members, are found here too: callers
-- read those members first and pass their ids in seen.)
-- Only push tokens count (their last part a token base, 10 characters and
-- 'p' (enqueue.c), then the message's number): a claim's token always has
-- its member, and a job still active under a claim token without one was
-- let go by its worker (a completion refused for want of memory: the token
-- forgotten, the job left to its lease), never to be started again here.
-- (The pattern is made inside the function: FUNCTION LOAD runs lib.lua's
-- top level where `string` is no global, and the library would not load.)
local function active_under(active, J, p, skip, seen)
  local push_end = '%.' .. string.rep('%w', 10) .. 'p%d+$'
  local toks, by = {}, {}
  local at = 0
  while true do
    local ids = redis.call('ZRANGE', active, at, at + CHUNK - 1)
    if #ids == 0 then break end
    at = at + #ids
    local s = redis.call('HMGET', J.s, unpack(ids))
    for i, id in ipairs(ids) do
      if s[i] and not (seen and seen[id]) and string.sub(s[i], 1, 7) == 'active ' then
        local state, _, t = state_of(s[i])
        if state == 'active' and t and string.sub(t, 1, #p) == p and not (skip and skip[t]) and
           string.find(t, push_end) then
          if not by[t] then by[t] = {}; toks[#toks + 1] = t end
          by[t][#by[t] + 1] = id
        end
      end
    end
    if #ids < CHUNK then break end
  end
  return toks, by
end

-- Start jobs ids (records d, o, s as load_jobs reads them) as the call
-- c says: c.active, c.held, c.deadlines (the queue's keys; deadlines nil:
-- none written), c.emit (its monitor), c.now (the caller's server time;
-- nil: read here), c.tok, c.deadline, c.also, c.before_write (below).
-- The jobs are active until `deadline` under fencing token tok, with one
-- more attempt. Appends id, payload, attempt, max_attempts of each
-- started job to out (a record deleted behind rjq's back is skipped),
-- and its wait; with c.runs, in runs instead (a claim's reply in runs,
-- claim.lua ARGV 10): per run of jobs of the same attempt, max attempts
-- and wait, its count, those three, then id and payload per job (the
-- jobs of one enqueue call, in a row, make one run: two values a job
-- where there were five). c.hi is then the started ids (after c.also's).
-- Returns how many started.
-- The jobs of one call share tok (it is new for every call, so each
-- claim of a job still has its own): the token check always pairs it
-- with the job's id, and a shared token spares a string per job (a
-- claim's Redis instructions per job -13% with the reply's token once
-- per call, callgrind). The state values are made once per attempt count.
-- The started jobs are entered in the held index under tok (c.held nil:
-- not, a push: see push_to_idle), with the ids
-- in `also` (jobs the caller already put under tok; nil: none). With
-- `also`, the member is written even when nothing started: it marks that
-- this token's call ran (a re-sent claim finds it).
-- A job with a timeout (its options) must end by now + timeout: that is
-- entered in `deadlines` (the queue's zset), and its lease never runs
-- past it (extend.lua caps it too), so a holder that hangs loses it then,
-- and the reclaim sweep fails it as timed out (reclaim.lua).
-- before_write (may be nil) is called before the first write with the
-- number of jobs that will start and whether any has a timeout (claim.lua
-- checks the keys it will write then). c.stated: the caller wrote the
-- jobs' active states already (job_maker: a new job pushed at once has
-- its state written once), so they are not written here. c.u (may be
-- nil): the undoable() of the caller's writes so far (job_maker): the
-- ZADD of active goes through it, checking active's type (undone if a
-- later write through u is refused), then c.after_lease() runs (may be
-- nil; with no job started, active is checked by TYPE first).
local function start_jobs(J, c, ids, d, o, s, out)
  local active, held, deadlines, emit, now = c.active, c.held, c.deadlines, c.emit, c.now
  local tok, deadline, also, before_write = c.tok, c.deadline, c.also, c.before_write
  local hi = {}
  if also then for i = 1, #also do hi[i] = also[i] end end
  local base = #hi
  local function enter(n)
    if held and (n > 0 or also) then
      redis.call('ZADD', held, '0', HELD_PIN, '0', tok .. ' ' .. table.concat(hi, ' '))
    end
    return n
  end
  -- (with no lease written through c.u, active is checked, then c.after_lease)
  local function no_lease()
    if c.u then c.u.check({active, 'zset'}) end
    if c.after_lease then c.after_lease() end
  end
  if #ids == 0 then
    if before_write then before_write(0, false) end
    no_lease()
    return enter(0)
  end
  -- Per-job appends use counters: #t is a search on every call.
  local za, st, n, k, seen = {'+inf', ACTIVE_PIN}, {}, 0, #out, {}
  -- (the jobs' start time, see the state column; c.stamp: now as text,
  -- now_stamp)
  local startn = now or now_ms()
  local started = c.stamp or int(startn)
  local dz -- ZADD arguments for deadlines
  local heads = {} -- attempt -> "active <attempt> <tok> @"
  -- A job whose state value is the job's before it (the same string: Lua
  -- interns them, so this is one comparison) starts with the same value
  -- and wait: the jobs of one enqueue call share their state ("ready 0
  -- @<enqueued>,,") and come in a row, so a run's value is read, made and
  -- its time parsed once (the find alone cost ~3.3k Redis instructions a
  -- job, tonumber's strtod ~2k, callgrind).
  local last_s, last_a, last_v, last_w
  -- (c.runs: the open run's count's index in out, its count, attempt, max
  -- attempts and wait)
  local runs, rh, rc, ra, rm, rw = c.runs, nil, 0, nil, nil, nil
  for i, id in ipairs(ids) do
    -- (an id twice in ids, which only a change behind rjq's back can do,
    -- starts once: the copies would share a token)
    if (not d or d[i]) and not seen[id] then
      seen[id] = true
      -- a job never started is "ready 0" (no state: made before job times)
      -- and mostly has no options
      local a, max, tmo, tm = 1, DEFAULT_MAX_ATTEMPTS, nil, nil
      -- a ready job's state, as the scripts write it, is read with one
      -- find (its attempts and enqueue time; state_of and times_split made
      -- this loop 30k Redis instructions per job, 14k this way, callgrind:
      -- bench/README.md "per-job Lua"); other values take the long way
      local sv = s[i]
      local v, q, w, _, a_, q_
      if sv and sv == last_s then
        a_, a, v, w = true, last_a, last_v, last_w
      else
        if sv then _, _, a_, q_ = string.find(sv, '^ready (%d+) @(%d*),%d*,%d*$') end
        if a_ then
          a = a_ == '0' and 1 or tonumber(a_) + 1 -- (a string compare: no number parsed)
          local h = heads[a]
          if not h then h = 'active ' .. num(a) .. ' ' .. tok .. ' @'; heads[a] = h end
          v = h .. q_ .. ',' .. started .. ','
          w = -1
          if a == 1 then
            local qn = tonumber(q_)
            if qn then w = math.max(startn - qn, 0) end
          end
          last_s, last_a, last_v, last_w = sv, a, v, w
        elseif sv then
          local _s, a2, _t, tm_ = state_of(sv)
          a, tm = a2 + 1, tm_
        end
      end
      if o[i] then
        local _, m_, _b, t_, _u, h_ = parse_options(o[i])
        max, tmo = m_, t_
        -- (with its headers: the worker reads both; max_of's value, without
        -- parsing the column twice: a group job's column holds its group's
        -- header, README "Groups")
        if h_ then max = num(m_) .. '\n' .. h_ end
      end
      if not a_ then
        -- (the value is made per job: its times are its own)
        v = 'active ' .. num(a) .. ' ' .. tok .. ' @' .. times_started(tm, started)
        q = a == 1 and tonumber((times_split(tm))) or nil
      end
      za[2 * n + 3] = deadline; za[2 * n + 4] = id
      if tmo and deadlines then
        local ends = now + tmo
        if ends < tonumber(deadline) then za[2 * n + 3] = int(ends) end
        dz = dz or {}
        dz[#dz + 1] = int(ends); dz[#dz + 1] = id
      end
      st[2 * n + 1] = id; st[2 * n + 2] = v
      -- its wait (enqueue to first start, ms; -1: a later run, or not known):
      -- the worker's history counts it (src/history.c)
      w = w or (q and math.max(startn - q, 0) or -1)
      if runs then
        if a ~= ra or max ~= rm or w ~= rw then -- (a new run: its head)
          if rh then out[rh] = rc end
          rh, rc, ra, rm, rw = k + 1, 0, a, max, w
          out[k + 1] = 0; out[k + 2] = a; out[k + 3] = max; out[k + 4] = w
          k = k + 4
        end
        rc = rc + 1
        out[k + 1] = id; out[k + 2] = d and d[i] or false
        k = k + 2
      else
        out[k + 1] = id; out[k + 2] = d and d[i] or false; out[k + 3] = a; out[k + 4] = max
        out[k + 5] = w
        k = k + 5
      end
      hi[base + n + 1] = id
      n = n + 1
    end
  end
  if rh then out[rh] = rc end
  c.hi = hi
  if before_write then before_write(n, dz ~= nil) end
  if n == 0 then no_lease(); return enter(0) end
  if c.u then
    -- through u (undoable(), job_maker): the ids are new jobs (their
    -- columns' fields were all new), so a reply of n added them all and
    -- ACTIVE_PIN was there, n + 1 the pin too
    c.u.call('zset', function(r)
      if r ~= n and r ~= n + 1 then return nil end
      local m = {}
      for i = 1, n do m[i] = za[2 * i + 2] end
      if r == n + 1 then m[n + 1] = ACTIVE_PIN end
      return function() redis.call('ZREM', active, unpack(m)) end
    end, 'ZADD', active, unpack(za))
    if c.after_lease then c.after_lease() end
  else
    typed('zset', 'ZADD', active, unpack(za)) -- (a claim's first write: see claim.lua)
  end
  -- (events after that write: a refused call's events are still published)
  if emit ~= UNMONITORED then
    for i = base + 1, base + n do emit('active', hi[i]) end
  end
  if not c.stated then redis.call('HSET', J.s, unpack(st)) end
  if dz then redis.call('ZADD', deadlines, unpack(dz)) end
  c.dz = dz -- (a push heard by nobody takes them back: push_to_idle)
  return enter(n)
end

-- A claim's reply of five values a job (next, registered, token,
-- deadline, then id, payload, attempt, max attempts, wait per job) in
-- runs, as start_jobs' c.runs makes it (claim.lua ARGV 10): for the
-- claim's other paths (a re-send, a recovery), which build the five.
local function to_runs(out)
  local r, k, rh, ra, rm, rw = {out[1], out[2], out[3], out[4]}, 4, nil, nil, nil, nil
  for i = 5, #out, 5 do
    local a, m, w = out[i + 2], out[i + 3], out[i + 4]
    if not rh or a ~= ra or m ~= rm or w ~= rw then
      rh, ra, rm, rw = k + 1, a, m, w
      r[k + 1] = 0; r[k + 2] = a; r[k + 3] = m; r[k + 4] = w
      k = k + 4
    end
    r[rh] = r[rh] + 1
    r[k + 1] = out[i]; r[k + 2] = out[i + 1]
    k = k + 2
  end
  return r
end

-- Push delivery. A worker whose claim came back short registers its free
-- slots in the queue's idle hash: field "<worker> <channel>", value
-- "<slots> <epoch> <lease ms> <format>". Enqueue then claims new jobs for
-- it and publishes them on the channel (its client's push channel for this
-- queue), saving the doorbell and the claim round trip. The epoch tells a
-- worker which registration a pushed job came from: a worker replaces its
-- registration (a new epoch) whenever it cannot trust its own count of it
-- (woken by the doorbell or the poll, after a reconnect), and it hands
-- back (release.lua) jobs pushed under an old epoch it has no room for.
-- <format> is PUSH_FORMAT, the push message format the worker reads: an
-- enqueue pushes only to registrations of a format it writes (its own, or
-- PUSH_OLD_FORMAT below) and drops the others (that worker then hears the doorbell and claims), so clients of
-- two versions on one queue never push to each other (a refused push
-- would have spent an attempt of its jobs). (7: a push writes no held
-- member, and its worker sends none of its tokens to be forgotten: a
-- format 6 enqueue, which writes one, pushes to no format 7 worker.)
local PUSH_FORMAT = '8'
-- (8: a payload of at least PUSH_SPLIT_MIN bytes follows its message as a
-- message of its own, "><length>" in its job's line, so the payload is
-- published from the Lua string it already is and never copied into a
-- new one (Redis' Lua hashes every byte of every string it makes). A
-- format 7 registration, an older client's, is still pushed to, in one
-- message; an older enqueue drops format 8 registrations, whose workers
-- then hear the doorbell and claim.)
local PUSH_OLD_FORMAT = '7'
local PUSH_SPLIT_MIN = 2048

-- A push carries a job's payload only while it is small: at most
-- PUSH_INLINE_MAX bytes, and at most PUSH_INLINE_TOTAL bytes of payloads
-- in all the messages of one call. Any other job goes as its id alone
-- ("-" for its payload length) and the worker reads its payload with a
-- plain HMGET (worker.c, "payload fetch"), so no message comes near a
-- subscriber connection's output buffer limit (client-output-buffer-limit
-- pubsub, 32mb hard and 8mb for 60 s by default: a message over it drops
-- the worker's subscriber connection, and with it every push and doorbell
-- in flight). The pushes a client can have in flight are bounded by the
-- slots its workers registered, each taking at most PUSH_INLINE_MAX.
local PUSH_INLINE_MAX = 16384
local PUSH_INLINE_TOTAL = 262144

-- While a queue is paused or limited (pause.lua, limits.lua) its idle hash
-- holds only this field (never a registration's: those start with a
-- number): completions, which read the hash anyway, then register no
-- slots (complete.lua) at no extra call, and an enqueue that picks it
-- pushes nothing.
local CONTROL_MARK = '~ paused or limited: no push delivery'

-- Drop every registration of idle; mark it when the queue is paused or
-- limited (meta), else unmark it.
local function reset_idle(idle, meta)
  redis.call('DEL', idle)
  local m = redis.call('HMGET', meta, 'paused', 'concurrency', 'rate')
  if m[1] or m[2] or m[3] then redis.call('HSET', idle, CONTROL_MARK, '1') end
end

-- The value of a registration: "<slots> <epoch> <lease> <format>", then
-- " 2" when q2 (the queue-format mark, docs/scripts.md "Queue format 2":
-- written only by a script that knows meta says format 2 — complete_one
-- finishing a job whose state held its channel, enqueue_one after its
-- read of meta — and kept by the rewrites of a marked one; qformat.lua
-- strips every mark when the queue goes back to 1, so a marked
-- registration means the queue is format 2 now).
local function registration(slots, epoch, lease, format, q2)
  return slots .. ' ' .. epoch .. ' ' .. lease .. ' ' .. (format or PUSH_FORMAT) .. (q2 and ' 2' or '')
end

-- A registration's format that this enqueue can push to (nil: none).
local function push_format_ok(format)
  return format == PUSH_FORMAT or format == PUSH_OLD_FORMAT
end

-- The lean pair's parses of strings that come again call after call,
-- memoised (enqueue_one.lua, complete_one.lua, push_to_idle, push_plan,
-- offer_slots): a pattern match with captures costs a few k Redis
-- instructions (callgrind), a lookup in a table next to nothing. reg_field(f): a registration's field
-- "<worker> <channel>" as wid, wch and the head of its push tokens
-- "<client>.<worker>." (the client: the channel's last ":" part);
-- nil when it is not of that form. reg_value(v): a registration's value
-- "<slots> <epoch> <lease> <format>[ 2]" as slots (a number; 0 when
-- it is not of that form), epoch, lease, format, its queue-format mark
-- (a boolean) and the lease as a number. framed_reply(ch): whether ch is
-- an awaiting client's framed reply channel (":reply:<hex>:framed" at its
-- end, no space).
-- A worker's field is the same at every push to it, its value takes few
-- forms, a producer's channel is the same for each of its jobs. The
-- tables live between calls of the function library (with EVALSHA each
-- call starts with empty ones) and are emptied at MEMO_MAX entries.
local reg_field, reg_value, framed_reply
do
  local MEMO_MAX = 4096
  local fields, values, framed, n = {}, {}, {}, 0
  local function room()
    if n >= MEMO_MAX then fields, values, framed, n = {}, {}, {}, 0 end
    n = n + 1
  end
  reg_field = function(f)
    local m = fields[f]
    if m == nil then
      local wid, wch = string.match(f, '^(%S+) (.+)$')
      local c = wch and string.match(wch, '([^:]+)$')
      m = wid and {wid, wch, c and (c .. '.' .. wid .. '.')} or false
      room()
      fields[f] = m
    end
    if m then return m[1], m[2], m[3] end
  end
  reg_value = function(v)
    local m = values[v]
    if m == nil then
      local slots, epoch, lease, format, q2 = string.match(v, '^(%d+) (%S+) (%d+) (%S+) ?(2?)$')
      m = {tonumber(slots or 0), epoch, lease, format, q2 == '2', lease and tonumber(lease)}
      room()
      values[v] = m
    end
    return m[1], m[2], m[3], m[4], m[5], m[6]
  end
  framed_reply = function(ch)
    local m = framed[ch]
    if m == nil then
      m = string.find(ch, ' ', 1, true) == nil and string.find(ch, ':reply:%x+:framed$') ~= nil
      room()
      framed[ch] = m
    end
    return m
  end
end

-- The key of a queue's group of each job (groups .. 'job'), memoised
-- (complete_one.lua: a concatenation per call otherwise).
local GROUP_JOBS, GROUP_JOBS_N = {}, 0
local function group_jobs_key(groups)
  local k = GROUP_JOBS[groups]
  if k then return k end
  if GROUP_JOBS_N >= 4096 then GROUP_JOBS, GROUP_JOBS_N = {}, 0 end
  GROUP_JOBS_N = GROUP_JOBS_N + 1
  k = groups .. 'job'
  GROUP_JOBS[groups] = k
  return k
end

-- A number argument's value, memoised by its text (complete_one.lua: the
-- count cap and the offer's slots, the same texts call after call; an
-- arithmetic coercion converts the text each time, ~0.4k Redis
-- instructions). A text that is not a number raises the coercion's error.
local TEXT_NUM, TEXT_NUM_N = {}, 0
local function text_num(s)
  local n = TEXT_NUM[s]
  if n then return n end
  n = s + 0
  if TEXT_NUM_N >= 4096 then TEXT_NUM, TEXT_NUM_N = {}, 0 end
  TEXT_NUM_N = TEXT_NUM_N + 1
  TEXT_NUM[s] = n
  return n
end

-- Register `slots` free slots of worker `field`: reset replaces the
-- registration (0 slots: removes it); otherwise they are added to a
-- registration of the same epoch, or start one when there is none.
-- v: the field's value when the caller already read it (false: absent;
-- nil: read it here). q2: mark the registration (see registration(); a
-- registration of the same epoch keeps its mark). Returns the slots
-- registered (0 when the stored epoch differs) and, without reset, the
-- field's value now.
local function offer_slots(idle, field, epoch, lease, slots, reset, v, q2)
  if reset then
    if slots > 0 then redis.call('HSET', idle, field, registration(num(slots), epoch, lease))
    else redis.call('HDEL', idle, field) end
    return slots
  end
  if slots <= 0 then return 0, v end
  if v == nil then v = redis.call('HMGET', idle, field)[1] end
  local have = 0
  if v then
    -- (a registration of rjq's form read by the memoised reg_value: its
    -- slots, epoch and mark as the two patterns below read them; another
    -- value by those patterns, and it has no mark)
    local n, e, _, _, m = reg_value(v)
    if e == nil then
      local t
      t, e = string.match(v, '^(%d+) (%S+)')
      n, m = tonumber(t), false
    end
    if e ~= epoch then return 0, v end
    have = n
    q2 = q2 or m
  end
  v = registration(num(have + slots), epoch, lease, nil, q2)
  redis.call('HSET', idle, field, v)
  return slots, v
end

-- Hand ready jobs to registered idle workers while both remain (at most
-- `budget` jobs). Each worker gets one message on its channel:
-- "<worker> <epoch> <count> <token> <deadline>\n" then per job
-- "<id len> <payload len> <attempt> <max attempts> <wait>\n" and the id and
-- payload bytes, or for a payload too big to push (PUSH_INLINE_MAX, _TOTAL)
-- "<id len> - <attempt> <max attempts> <wait>\n" and the id bytes; a job
-- with headers has "<max attempts>+<headers length>" and its headers text
-- right after its id (format 7); for a format 8 registration a payload of
-- at least PUSH_SPLIT_MIN bytes has "><payload length>" and is left out
-- of the message: it follows it as a message of its own (in job order),
-- published from its own Lua string (format 8; the jobs of a
-- message share their token, see start_jobs, and their lease's end, in
-- server time). A worker whose
-- channel has no subscriber (its client is
-- gone or reconnecting) loses its registration instead: with back given
-- (enqueue.lua's pushes, npush36), the message is sent and its PUBLISH
-- reply, the subscribers it reached, is the proof; a message heard by
-- nobody is undone in the same call (its jobs' leases, deadlines and
-- states, then back(ids) puts them where take() took them), as
-- enqueue_one.lua does (docs/scripts.md "A push heard by nobody");
-- genqueue.lua's group take gives back too (GROUPS.untake, gpushundo).
-- With no back, PUBSUB NUMSUB is asked first, as before; on a cluster
-- too, back or not (SHARDNUMSUB: a SPUBLISH's count proves nothing there,
-- so nothing is undone). (A push trusting the count without such an undo must end its
-- head "<deadline> ?\n": the worker then starts only the jobs whose state
-- still holds the message's token, src/push.c.)
-- pick: the caller's HRANDFIELD idle 1 WITHVALUES, the first worker tried.
-- take(n): up to n jobs to start, as ids and their records d, o, s (see
-- load_jobs), in claim order; from_ready or new_jobs below.
-- The token of a message is "<client>.<worker>.<tbase><k>" (the client's
-- id ends its push channel's name). A push writes no member of the held
-- index: its jobs are found by their token's prefix in their states
-- (active_under), the rare paths that need them (a lost push's recovery,
-- the orphan sweep).
-- deadlines: the queue's zset of run time ends (see start_jobs). now:
-- the caller's server time, when it read it (nil: read here when needed).
-- plan: true when push_plan planned the first message, to pick (checked
-- there), and the caller wrote its jobs' states already (nil: none).
-- first (with plan; nil: none): {u = undoable(), after = f}: the first
-- message's lease is written through u (it checks active's type; see
-- start_jobs c.u), then f() runs.
-- back (nil: none, NUMSUB asked): back(ids) puts the last take's jobs
-- back (from_ready's, new_jobs').
-- Returns how many jobs were taken (and kept), and how many were undone.
local function push_to_idle(J, active, idle, tbase, budget, emit, pick, take, deadlines, now, plan, first, back)
  local k, taken, inline_left, undone = 0, 0, PUSH_INLINE_TOTAL, 0
  -- On a cluster a message heard by nobody here may still be heard: a
  -- SPUBLISH reaches the subscribers of the shard's replicas too (over the
  -- cluster bus) and counts this node's only, so its reply proves nothing
  -- and the message is never undone there: SHARDNUMSUB is asked first, as
  -- before npush36 (test_chaos' cluster case: a worker subscribed on a
  -- restarted old master, now a replica, heard pushes the count called
  -- unheard, and the undone jobs were pushed again to other workers).
  local undo = back and (PUB or pub_mode()) ~= 'SPUBLISH'
  while budget > 0 do
    pick = pick or redis.call('HRANDFIELD', idle, 1, 'WITHVALUES')
    if #pick == 0 then break end
    local field, v = pick[1], pick[2]
    pick = nil
    if field == CONTROL_MARK then break end -- paused or limited: no registrations
    local wid, ch, thead = reg_field(field) -- (parses memoised: reg_field, reg_value)
    local slots, epoch, lease, format, q2, lease_n = reg_value(v)
    -- (with back, no PUBSUB NUMSUB: the message's PUBLISH counts the
    -- worker's subscribers, and a message heard by nobody is undone below)
    if not plan and (not ch or slots < 1 or not push_format_ok(format) or
       (not undo and numsub(ch) == 0)) then
      redis.call('HDEL', idle, field)
    else
      local ids, d, o, s = take(math.min(slots, budget))
      if #ids == 0 then break end
      taken = taken + #ids
      now = now or now_ms()
      k = k + 1
      local out, tok = {}, thead .. tbase .. k
      local deadline = int(now + lease_n)
      -- (the active events wait for the message to be heard)
      local evs = emit ~= UNMONITORED and undo and {} or nil
      local c = {active = active, deadlines = deadlines, now = now,
                 emit = evs and function(_, id) evs[#evs + 1] = id end or emit,
                 tok = tok, deadline = deadline, stated = plan ~= nil,
                 u = first and first.u, after_lease = first and first.after}
      local n = start_jobs(J, c, ids, d, o, s, out)
      plan, first = nil, nil
      budget = budget - #ids
      local heard = 1
      local inline_was = inline_left
      if n > 0 then
        local msg = {wid .. ' ' .. epoch .. ' ' .. n .. ' ' .. tok .. ' ' .. deadline .. '\n'}
        local split, after = format == PUSH_FORMAT, nil -- payloads sent as messages of their own
        for i = 1, #out, 5 do
          local p = out[i + 1]
          local len = #p
          local wait = out[i + 4] >= 0 and int(out[i + 4]) or '-'
          -- max attempts, and a job's headers (start_jobs) as "+<length>"
          -- after it, their bytes after the id's
          local m, h = out[i + 3], nil
          if type(m) == 'string' then
            local mx, hx = string.match(m, '^(%d+)\n(.*)$')
            m, h = mx .. '+' .. num(#hx), hx
          else
            m = num(m)
          end
          if len <= PUSH_INLINE_MAX and len <= inline_left then
            inline_left = inline_left - len
            local own = split and len >= PUSH_SPLIT_MIN
            msg[#msg + 1] = num(#out[i]) .. (own and ' >' or ' ') .. num(len) .. ' ' ..
                            num(out[i + 2]) .. ' ' .. m .. ' ' .. wait .. '\n'
            msg[#msg + 1] = out[i]
            if h then msg[#msg + 1] = h end
            if own then
              after = after or {}
              after[#after + 1] = p
            else
              msg[#msg + 1] = p
            end
          else
            msg[#msg + 1] = num(#out[i]) .. ' - ' .. num(out[i + 2]) .. ' ' .. m .. ' ' ..
                            wait .. '\n'
            msg[#msg + 1] = out[i]
            if h then msg[#msg + 1] = h end
          end
        end
        heard = redis.call(PUB or pub_mode(), ch, table.concat(msg))
        -- the payloads of "><length>" jobs, in their order, right after
        -- (one script: nothing comes between them on the channel), only
        -- after a head that was heard
        if after and (heard > 0 or not undo) then
          for i = 1, #after do redis.call(PUB, ch, after[i]) end
        end
      end
      if heard > 0 or not undo then
        if evs then for i = 1, #evs do emit('active', evs[i]) end end
        if slots - n > 0 then
          redis.call('HSET', idle, field, registration(slots - n, epoch, lease, format, q2))
        else
          redis.call('HDEL', idle, field)
        end
      else
        -- Heard by nobody (the worker is gone, or its subscriber connection
        -- is down; docs/scripts.md "A push heard by nobody"): the message
        -- is undone in this call, so it started none of its jobs: their
        -- leases and run-time deadlines gone, their states back as they
        -- were (the attempt unspent), the jobs back where take() took them
        -- (back), the stale registration dropped; the loop goes on with
        -- the next registration (the caller rings the doorbell for jobs
        -- left ready: the undone count is its second reply).
        local m = {}
        for i = 1, #out, 5 do m[#m + 1] = out[i] end
        redis.call('ZREM', active, unpack(m))
        if c.dz then
          local dm = {}
          for i = 2, #c.dz, 2 do dm[#dm + 1] = c.dz[i] end
          redis.call('ZREM', deadlines, unpack(dm))
        end
        local st, started, none = {}, {}, {}
        for i = 1, #m do started[m[i]] = true end
        for i, id in ipairs(ids) do
          if started[id] then
            -- (a job with no state, "ready 0" from before job times, gets none again)
            if s[i] then st[#st + 1] = id; st[#st + 1] = s[i]; started[id] = nil
            else none[#none + 1] = id end
          end
        end
        if #st > 0 then redis.call('HSET', J.s, unpack(st)) end
        if #none > 0 then redis.call('HDEL', J.s, unpack(none)) end
        redis.call('HDEL', idle, field)
        back(ids)
        taken, budget, inline_left = taken - #ids, budget + #ids, inline_was
        undone = undone + n
      end
    end
  end
  return taken, undone
end

-- The first message push_to_idle will send to pick (the caller's HRANDFIELD
-- idle 1 WITHVALUES), planned before the new jobs' columns are written, so
-- their states are written once, active (job_maker): nil when pick is no
-- registration to push to (push_to_idle then drops it), else how many of
-- `budget` new jobs it takes and the state value of each (with sv, the
-- value they were made with, and the call's time now): as start_jobs
-- writes it. The same token as push_to_idle's first message (k = 1).
local function push_plan(pick, tbase, budget, sv, now)
  if #pick == 0 or pick[1] == CONTROL_MARK then return nil end
  local _, ch, thead = reg_field(pick[1]) -- (parses memoised: reg_field, reg_value)
  local slots, _, _, format = reg_value(pick[2])
  -- (no PUBSUB NUMSUB: push_to_idle undoes a message heard by nobody;
  -- on a cluster it does not, SPUBLISH's count proving nothing: asked)
  if not ch or slots < 1 or not push_format_ok(format) or
     ((PUB or pub_mode()) == 'SPUBLISH' and numsub(ch) == 0) then
    return nil
  end
  local tok = thead .. tbase .. 1
  local _, a, _t, tm = state_of(sv)
  return math.min(slots, budget), 'active ' .. num(a + 1) .. ' ' .. tok .. ' @' .. times_started(tm, int(now))
end

-- A take() for push_to_idle: jobs waiting in ready and prio.
-- back(ids): the last take's jobs, of a message heard by nobody, put
-- back where they were (push_to_idle).
local function from_ready(J, ready, prio)
  local keep = {}
  local function take(want)
    local ids = take_ready(ready, prio, want, keep)
    if #ids == 0 then return ids end
    return ids, load_jobs(J, ids)
  end
  local function back() put_back(ready, prio, keep) end
  return take, back
end

-- A take() for push_to_idle over jobs this script just created (ids with
-- payloads d and stored options o, false for defaults; never started;
-- their state value sv, the same for all), so they go to a worker without
-- passing through ready. rest() returns the ids not taken.
local function new_jobs(ids, d, o, sv)
  local at = 1
  local function take(want)
    local last = math.min(at + want - 1, #ids)
    local a, b, c, e = {}, {}, {}, {}
    for i = at, last do
      a[#a + 1] = ids[i]; b[#b + 1] = d[i]; c[#c + 1] = o[i]; e[#e + 1] = sv
    end
    at = last + 1
    return a, b, c, e
  end
  local function rest()
    local r = {}
    for i = at, #ids do r[#r + 1] = ids[i] end
    return r
  end
  -- the last take's jobs not taken after all (a message heard by nobody,
  -- push_to_idle): they come first in the next take or in rest()
  local function back(got)
    at = at - #got
  end
  return take, rest, back
end

-- The jobs one script call creates (enqueue.lua, fire.lua): the one writer
-- of a new job's columns, its state (with its times: enqueued now), its
-- place and the doorbell. Returns c:
--   c.add(id, payload, stored, delay, p, seq, watch): job `id` is new, with
--     payload (nil: written ahead, enqueue.lua "Payloads ahead"), options
--     column value stored (false: defaults), delay ms, priority p, sequence
--     number seq (its rank within its priority: the caller runs
--     renumber_prio first when seq starts a rank window) and watch (the
--     reply channel of an awaiting producer, or nil). A delayed job and a
--     ready one of priority p ~= 0 take their place at once (in the order
--     of the calls); columns and states wait for c.finish, as do the ready
--     jobs of priority 0 (so a batch writes each column with one HSET).
--   c.finish(push, ring): writes the columns and states of the jobs added,
--     puts those of priority 0 made ready at the tail of ready and rings
--     the doorbell (one PUBLISH on wake) when jobs became ready in a queue
--     that had nothing ready (nothing_ready: the caller read it before its
--     first write), a delayed job became the earliest, or ring (the
--     caller's own reason) is true. push: push delivery to idle workers
--     (enqueue.lua): {active, idle, deadlines, tbase, pick (see
--     push_to_idle), direct (the new jobs may go to workers without
--     passing through ready: new_jobs)}; the doorbell then rings only for
--     jobs left ready. nil: none (fire.lua: its jobs wait in ready, idle
--     workers hear the doorbell).
--   c.at(): the call's server time (read once, at the first use; the
--     new jobs' enqueue time).
local function job_maker(J, ready, prio, delayed, wake, emit, nothing_ready)
  local c = {now = nil}
  local payloads, opts, watch, states = {}, {}, {}, {}
  local plain, plain_d, plain_o, plain_s = {}, {}, {}, {} -- new priority 0 jobs made ready
  local nplain, became_ready, ring, ready_v, qtimes = 0, 0, false, nil, nil
  function c.at()
    c.now = c.now or now_ms()
    return c.now
  end
  function c.add(id, payload, stored, delay, p, seq, watch_ch)
    if not qtimes then
      qtimes = int(c.at()) .. ',,'
      ready_v = state_value('ready', '0', nil, qtimes)
    end
    if payload then payloads[#payloads + 1] = id; payloads[#payloads + 1] = payload end
    if stored then opts[#opts + 1] = id; opts[#opts + 1] = stored end
    if watch_ch then watch[#watch + 1] = id; watch[#watch + 1] = watch_ch end
    states[#states + 1] = id
    if delay > 0 then
      states[#states + 1] = state_value('delayed', '0', nil, qtimes)
      if push_delayed(delayed, id, c.now + delay) then ring = true end
    else
      states[#states + 1] = ready_v
      if p == 0 then
        nplain = nplain + 1
        plain[nplain] = id; plain_d[nplain] = payload; plain_o[nplain] = stored; plain_s[nplain] = #states
      else
        redis.call('ZADD', prio, prio_score(p, seq), id)
      end
      became_ready = became_ready + 1
    end
    if emit ~= UNMONITORED then emit('enqueued', id) end
  end
  function c.finish(push, ring_too, u)
    -- Nothing was waiting: new jobs go straight to idle workers, in order
    -- (below); those of the first message have their state written once,
    -- active, with the columns (push_plan).
    local direct = became_ready > 0 and push and push.direct and nothing_ready
    local plan, planned, active_v = nil, 0, nil
    if direct then
      planned, active_v = push_plan(push.pick, push.tbase, became_ready, ready_v, c.now)
      if planned then
        plan = true
        for i = 1, planned do states[plain_s[i]] = active_v end
      end
    end
    -- the columns; through u (undoable(), may be nil) they check their own
    -- types: a column written so that its undo is not exact (a field of a
    -- new job was there) has the others checked by TYPE first. So does
    -- active when the caller left it unchecked (push.unchecked: its type
    -- not checked yet, u given): the lease of the first message (push_plan)
    -- is then written through u right after the columns, before the
    -- watchers (written last through u, not undone), and checks its own
    -- type; with no such lease active gets its TYPE here.
    local unchecked = u and push and push.unchecked
    local w = {}
    if #payloads > 0 then w[#w + 1] = J.d; w[#w + 1] = payloads end
    if #opts > 0 then w[#w + 1] = J.o; w[#w + 1] = opts end
    if #states > 0 then w[#w + 1] = J.s; w[#w + 1] = states end
    for i = 1, #w + 1, 2 do
      if u and not u.exact then
        local spec = {}
        for j = i, #w, 2 do spec[#spec + 1] = w[j]; spec[#spec + 1] = 'hash' end
        if #watch > 0 then spec[#spec + 1] = J.n; spec[#spec + 1] = 'hash' end
        if unchecked then spec[#spec + 1] = push.active; spec[#spec + 1] = 'zset' end
        u.check(spec)
        u, unchecked = nil, false
      end
      if i > #w then break end
      if u then u.hset(w[i], w[i + 1]) else call_all('HSET', w[i], w[i + 1], 2) end
    end
    local function watchers()
      if #watch > 0 then set_watchers(J, watch, u) end -- (last through u: not undone)
    end
    local lease = nil
    if direct and plan and unchecked then
      lease = {u = u}
      function lease.after() lease.done = true; watchers() end
    end
    if not lease then
      if unchecked then u.check({push.active, 'zset'}) end
      watchers()
    end
    ring = ring or ring_too
    if direct then
      -- only the rest is queued (waking idle workers elsewhere)
      local take, rest, back = new_jobs(plain, plain_d, plain_o, ready_v)
      push_to_idle(J, push.active, push.idle, push.tbase, became_ready, emit, push.pick,
                   take, push.deadlines, c.now, plan, lease, back)
      if lease and not lease.done then -- (no job of the message started)
        u.check({push.active, 'zset'})
        watchers()
      end
      local left = rest()
      if #left > 0 then rpush_all(ready, left); ring = true end
    elseif became_ready > 0 then
      if nplain > 0 then rpush_all(ready, plain) end
      local pushed, undone = 0, 0
      if push then
        local take, back = from_ready(J, ready, prio)
        pushed, undone = push_to_idle(J, push.active, push.idle, push.tbase, became_ready, emit,
                                      push.pick, take, push.deadlines, c.now, nil, nil, back)
      end
      -- jobs left ready in a queue that had nothing ready, or jobs of a
      -- push heard by nobody: wake idle workers
      if (nothing_ready and pushed < became_ready) or undone > 0 then ring = true end
    end
    if ring then redis.call(PUB or pub_mode(), wake, '1') end
  end
  return c
end
