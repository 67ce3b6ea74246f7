// rjq dashboard: one page, no build step, no dependency. It reads the
// JSON API of rjq serve (docs/rjq.1, SERVE) and is updated by its event
// stream (/v1/events): nothing polls (but a running search, searchPage). Every string from the server goes
// into the page as text (textContent), never as markup.
'use strict';

const state = {
  server: null,          // GET /v1/server
  token: sessionStorage.getItem('rjq-token') || '',
  queues: new Map(),     // name -> queue JSON (stats, rates, ...)
  history: new Map(),    // name -> last done/s values (sparklines)
  events: null,          // the EventSource
  eventsKey: '',
  view: null,            // the view object on screen
  statsSeq: 0,           // stats events received so far
  statsAt: new Map(),    // name -> statsSeq of its last stats event
  streamOpen: false,     // the event stream is connected
  redis: true,           // Redis reachable (the stream's "server" events)
  redisDownSince: null,  // since when it is not (server ms), while it is not
};

// The badge in the header: the stream's state, and Redis' (red when down).
function showConn() {
  const conn = document.getElementById('conn');
  if (!state.streamOpen) { conn.textContent = 'reconnecting'; conn.className = 'conn down'; }
  else if (!state.redis) { conn.textContent = 'redis down'; conn.className = 'conn bad'; }
  else { conn.textContent = 'live'; conn.className = 'conn live'; }
}

const SPARK = 40;
const PAGE = 50;
const STATES = ['ready', 'delayed', 'active', 'dead', 'cancelled', 'completed'];
// a queue page's tabs: its states, and the jobs waiting for their dependencies
const TABS = [...STATES, 'waiting'];
// a job's states before it finishes, in rjq top's order (waiting: for its
// dependencies): the depth columns and boxes lead with them, and a job in
// any of them can be cancelled
const UNFINISHED = ['ready', 'delayed', 'waiting', 'active'];

// ---- small helpers -------------------------------------------------------

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function fmt(n) {
  if (n === null || n === undefined) return '–';
  if (typeof n === 'number' && !Number.isInteger(n)) return n < 10 ? n.toFixed(1) : Math.round(n).toString();
  return Number(n).toLocaleString('en-US');
}

function ms(v) {
  if (v === null || v === undefined) return '–';
  if (v < 1) return '<1 ms';
  if (v < 1000) return v.toFixed(v < 10 ? 1 : 0) + ' ms';
  return (v / 1000).toFixed(1) + ' s';
}

function enc(s) { return encodeURIComponent(s); }

async function api(method, path, body) {
  const headers = {};
  if (state.token) headers['Authorization'] = 'Bearer ' + state.token;
  const r = await fetch(path, { method, headers, body });
  if (r.status === 401) { askToken(); throw new Error('a token is needed'); }
  const text = await r.text();
  let data = null;
  try { data = JSON.parse(text); } catch (e) { data = { raw: text }; }
  if (!r.ok && r.status !== 202) {
    const msg = (data && data.error) || text || r.statusText;
    const err = new Error(`${r.status}: ${msg}`);
    err.status = r.status;
    err.data = data;
    throw err;
  }
  return { status: r.status, data, headers: r.headers, text };
}

function toast(msg, bad) {
  const t = el('div', { class: 'toast' + (bad ? ' bad' : ''), role: 'status' }, msg);
  document.getElementById('toasts').append(t);
  setTimeout(() => t.remove(), bad ? 6000 : 3000);
}

// Bytes as the API gives them: a string, or {"base64": ...} (not UTF-8).
function bytesView(v) {
  if (v === null || v === undefined) return el('span', { class: 'muted' }, 'none');
  if (typeof v === 'object' && v.base64 !== undefined) {
    const raw = atob(v.base64);
    const lines = [];
    for (let i = 0; i < raw.length; i += 16) {
      const chunk = raw.slice(i, i + 16);
      const hex = Array.from(chunk, c => c.charCodeAt(0).toString(16).padStart(2, '0')).join(' ');
      const asc = Array.from(chunk, c => (c >= ' ' && c <= '~') ? c : '.').join('');
      lines.push(i.toString(16).padStart(8, '0') + '  ' + hex.padEnd(48) + ' ' + asc);
    }
    return el('pre', { class: 'bytes hex', 'data-kind': 'hex' }, lines.join('\n'));
  }
  try {
    const parsed = JSON.parse(v);
    if (parsed !== null && typeof parsed === 'object')
      return el('pre', { class: 'bytes json', 'data-kind': 'json' }, JSON.stringify(parsed, null, 2));
  } catch (e) { /* text */ }
  return el('pre', { class: 'bytes text', 'data-kind': 'text' }, v);
}

function spark(values) {
  const w = 120, h = 24;
  const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
  svg.setAttribute('width', w);
  svg.setAttribute('height', h);
  svg.setAttribute('class', 'spark');
  svg.setAttribute('viewBox', `0 0 ${w} ${h}`);
  const max = Math.max(1e-9, ...values);
  const pts = values.map((v, i) => `${(i / (SPARK - 1)) * w},${h - 1 - (v / max) * (h - 2)}`);
  const p = document.createElementNS('http://www.w3.org/2000/svg', 'polyline');
  p.setAttribute('points', pts.join(' '));
  svg.append(p);
  return svg;
}

function canAct() { return state.server && !state.server.read_only; }

// An action button: hidden in read-only mode.
function action(label, fn, cls) {
  if (!canAct()) return null;
  return el('button', {
    class: 'act ' + (cls || ''), 'data-action': label,
    onclick: async (ev) => {
      ev.preventDefault();
      const b = ev.currentTarget;
      b.disabled = true;
      try { await fn(); } catch (e) { toast(e.message, true); } finally { b.disabled = false; }
    },
  }, label);
}

// ---- the event stream ----------------------------------------------------

function connectEvents(query) {
  const key = query;
  if (state.events && state.eventsKey === key) return;
  if (state.events) state.events.close();
  const params = new URLSearchParams(query);
  if (state.token) params.set('access_token', state.token);
  const es = new EventSource('/v1/events?' + params.toString());
  state.events = es;
  state.eventsKey = key;
  es.onopen = () => { state.streamOpen = true; showConn(); };
  es.onerror = () => { state.streamOpen = false; showConn(); };
  es.addEventListener('server', (m) => {
    const d = JSON.parse(m.data);
    const back = d.redis && !state.redis;
    state.redis = d.redis;
    state.redisDownSince = d.redis ? null : d.down_since_ms;
    showConn();
    if (state.view && state.view.onServer) state.view.onServer(d, back);
  });
  es.addEventListener('stats', (m) => {
    const q = JSON.parse(m.data);
    state.queues.set(q.name, q);
    state.statsAt.set(q.name, ++state.statsSeq);
    const h = state.history.get(q.name) || [];
    h.push(q.rates.done);
    while (h.length > SPARK) h.shift();
    state.history.set(q.name, h);
    if (state.view && state.view.onStats) state.view.onStats(q);
  });
  es.addEventListener('demo', (m) => {
    if (state.view && state.view.onDemo) state.view.onDemo(JSON.parse(m.data));
  });
  es.addEventListener('processes', (m) => {
    if (state.view && state.view.onProcesses) state.view.onProcesses(JSON.parse(m.data).processes);
  });
  es.addEventListener('job', (m) => {
    if (state.view && state.view.onJob) state.view.onJob(JSON.parse(m.data));
  });
}

// ---- views -----------------------------------------------------------------

function overview(main) {
  const body = el('tbody');
  const table = el('table', { class: 'queues', id: 'queues' },
    el('thead', {}, el('tr', {},
      ['queue', ...UNFINISHED, 'dead', 'completed', 'in/s', 'done/s', 'fail/s',
       'wait', 'run', 'done/s history', ''].map(h => el('th', {}, h)))),
    body);
  const NO_QUEUE = 'No queue yet: queues appear once something enqueues to them or a worker runs on them.';
  const since = () => state.redisDownSince ? ` since ${clock(state.redisDownSince)}` : '';
  const noRedis = () => `Redis is unreachable${since()}: the queues cannot be read (the server retries).`;
  const empty = el('p', { class: 'muted', id: 'empty' }, state.redis ? NO_QUEUE : noRedis());
  const down = el('div', { id: 'redis-down', class: 'warning bad', hidden: state.redis }, noRedis());
  const warn = el('div', { id: 'evict-warning', class: 'warning', hidden: true });
  const health = el('div', { id: 'redis-health', class: 'muted health' });
  main.append(el('h1', {}, 'Queues'), down, warn, health, state.server.demo ? demoPanel() : '', empty, table);
  // Redis' health line: each master's version, role, clients, memory (INFO,
  // read every 2 s), or red while Redis is unreachable: never the last
  // figures read as if current (the server forgets them when Redis goes)
  let healthKnown = false, healthAsking = false;
  function drawHealth(d) {
    if (!state.redis) {
      healthKnown = false;
      warn.hidden = true;
      health.replaceChildren(el('span', { class: 'node bad', id: 'redis-unreachable' },
        `Redis unreachable${since()}`));
      return;
    }
    const mb = (b) => b === null || b === undefined ? '–' : (b / 1048576).toFixed(1) + ' MB';
    healthKnown = !!d.redis_nodes;
    health.replaceChildren(...(d.redis_nodes || []).map(n => el('span', {
      class: 'node' + (n.ok ? '' : ' bad'), 'data-node': n.address },
      n.ok ? `Redis ${n.version || '?'} at ${n.address} · ${n.role || '?'} · ${fmt(n.clients)} clients · ` +
             `${mb(n.used_memory)} used` : `Redis at ${n.address}: ${n.error || 'no answer'}`)));
    const m = d.redis_memory;
    warn.hidden = !(m && m.can_evict_jobs);
    if (m && m.can_evict_jobs)
      warn.textContent = `Redis may delete jobs to make room: its maxmemory-policy is ${m.maxmemory_policy} ` +
        `under a maxmemory of ${fmt(m.maxmemory)} bytes. Set maxmemory-policy noeviction for job queues.`;
  }
  let healthAgain = false;
  function loadHealth() {
    if (healthAsking) { healthAgain = true; return; } /* (asked again once this answer is in) */
    healthAsking = true;
    api('GET', '/v1/server').then(r => {
      if (r.data.redis !== false || !state.redis) drawHealth(r.data); /* (else older than the stream) */
    }).catch(() => {}).finally(() => {
      healthAsking = false;
      if (healthAgain) { healthAgain = false; loadHealth(); }
    });
  }
  loadHealth();
  const rows = new Map();
  function row(q) {
    if (q.shard_of !== undefined) return; /* a sharded queue is one row: its shards are not */
    const s = q.stats || {};
    const cells = [
      el('td', {}, el('a', { href: '#/q/' + enc(q.name), class: 'qname' }, q.name),
        q.shards > 1 ? el('span', { class: 'badge shards', 'data-shards': q.shards }, `${q.shards} shards`) : ''),
      ...UNFINISHED.map(k => el('td', { class: 'num', 'data-stat': k }, fmt(s[k]))),
      el('td', { class: 'num' + (s.dead_depth ? ' warn' : ''), 'data-stat': 'dead_depth' }, fmt(s.dead_depth)),
      el('td', { class: 'num', 'data-stat': 'completed' }, fmt(s.completed)),
      el('td', { class: 'num' }, fmt(q.rates.in)),
      el('td', { class: 'num' }, fmt(q.rates.done)),
      el('td', { class: 'num' }, fmt(q.rates.fail)),
      el('td', { class: 'num' }, ms(q.wait_ms)),
      el('td', { class: 'num' }, ms(q.run_ms)),
      el('td', {}, spark(padHistory(state.history.get(q.name)))),
      el('td', {}, s.paused ? el('span', { class: 'badge paused' }, 'paused') : ''),
    ];
    const tr = el('tr', { 'data-queue': q.name }, cells);
    const old = rows.get(q.name);
    if (old) old.replaceWith(tr);
    else insertSorted(body, tr, q.name);
    rows.set(q.name, tr);
    empty.hidden = rows.size > 0;
    table.hidden = rows.size === 0 || !state.redis; /* (while Redis is down: no stale figures) */
  }
  for (const q of [...state.queues.values()].sort((a, b) => a.name < b.name ? -1 : 1)) row(q);
  empty.hidden = rows.size > 0;
  table.hidden = rows.size === 0 || !state.redis;
  // The listing and the stream come on two connections: a queue the
  // stream told of after the listing was asked for keeps the stream's
  // stats (the listing's may be older, and the stream sends a queue's
  // stats only when they change).
  function list() {
    const asked = state.statsSeq;
    api('GET', '/v1/queues').then(r => {
      for (const q of r.data.queues) {
        if (q.stats && (state.statsAt.get(q.name) || 0) <= asked) { state.queues.set(q.name, q); row(q); }
      }
    }).catch(e => { if (e.status !== 503) toast(e.message, true); });
  }
  list();
  connectEvents('jobs=0');
  function onServer(d, back) {
    down.hidden = d.redis;
    down.textContent = noRedis();
    empty.textContent = d.redis ? NO_QUEUE : noRedis();
    table.hidden = rows.size === 0 || !d.redis;
    if (!d.redis) drawHealth(d);
    if (back) list();
    if (d.redis && d.nodes && !healthKnown) loadHealth(); /* (back: once the server read Redis again) */
  }
  return { onStats: (q) => { row(q); if (q.name === 'demo' && demoLists) demoLists(); }, onServer,
    onDemo: (d) => { if (demoDraw) demoDraw(d); } };
}

// --demo: the docs demo's controls (rjq serve --demo, /v1/demo); its
// numbers come with the stream's "demo" events
let demoDraw = null;
let demoLists = null; // the demo's four lists: redrawn with the demo queue's stats too
function demoPanel() {
  const info = el('span', { class: 'muted', id: 'demo-info' });
  const num = (name, value, attrs) => el('input', Object.assign({ name, type: 'number', value }, attrs || {}));
  const enq = el('form', { id: 'demo-enqueue', class: 'demo-row' },
    el('b', {}, 'enqueue '), num('n', 20, { min: 1, max: 1000 }), ' jobs of kind ',
    el('select', { name: 'kind' }, ['email', 'thumbnail', 'report'].map(k => el('option', { value: k }, k))),
    el('button', { type: 'submit', 'data-action': 'demo-enqueue' }, 'enqueue'));
  const pool = el('form', { id: 'demo-pool', class: 'demo-row' },
    el('b', {}, 'worker pool '), 'size ', num('size', 4, { min: 0, max: 1000 }),
    ' latency ms ', num('latency_ms', 200, { min: 0, max: 60000 }),
    ' fail % ', num('fail_pct', 10, { min: 0, max: 100 }),
    ' hang % ', num('hang_pct', 5, { min: 0, max: 100 }),
    el('button', { type: 'submit', 'data-action': 'demo-pool' }, 'apply'),
    el('button', { type: 'button', 'data-action': 'demo-reclaim', onclick: async () => {
      try {
        const r = await api('POST', '/v1/demo/reclaim');
        toast(`reclaim sweep: ${r.data.reclaimed} job(s) back`);
      } catch (e) { toast(e.message, true); }
    } }, 'reclaim sweep'));
  // The pool's fields show the server's values, except those edited since
  // the last apply: a live update must not undo what the user typed.
  const edited = new Set();
  pool.addEventListener('input', (ev) => { if (ev.target.name) edited.add(ev.target.name); });
  // the seed's four lists side by side, each row the job's kind (newest
  // ten of each), redrawn with each demo event (about once a second)
  const LISTS = [['queued', 'ready'], ['processing', 'active'], ['completed', 'completed'], ['failed', 'dead']];
  const cols = LISTS.map(([title, st]) => {
    const body = el('ul', { class: 'demo-jobs' });
    const head = el('h3', {}, title);
    return { title, st, body, head, box: el('div', { class: 'demo-list', 'data-list': title }, head, body) };
  });
  const lists = el('div', { class: 'demo-lists', id: 'demo-lists' }, cols.map(c => c.box));
  let listing = false;
  async function drawLists() {
    if (listing) return;
    listing = true;
    try {
      await Promise.all(cols.map(async (c) => {
        const base = `/v1/queues/demo/jobs?state=${c.st}`;
        // (completed, failed: kept oldest first; the newest ten are shown)
        const all = (await api('GET', `${base}&limit=1000&rows=0`)).data.ids;
        const from = Math.max(0, all.length - 10);
        const jobs = all.length ? (await api('GET', `${base}&offset=${from}&limit=10`)).data.jobs || [] : [];
        if (c.st === 'completed' || c.st === 'dead') jobs.reverse();
        c.head.textContent = `${c.title} (${all.length >= 1000 ? '1000+' : all.length})`;
        c.body.replaceChildren(...(jobs.length ? jobs.map(j => el('li', { 'data-id': String(j.id), 'data-kind': j.kind || '' },
          el('span', { class: 'kind' }, j.kind || j.preview || '?'), ' ',
          el('a', { href: `#/q/demo/job/${enc(String(j.id))}`, class: 'muted' }, '#' + j.id),
          j.attempts > 1 ? el('span', { class: 'muted' }, ` · attempt ${j.attempts}`) : '')) :
          [el('li', { class: 'muted' }, 'none')]));
      }));
    } catch (e) { /* the next event redraws */ }
    finally { listing = false; }
  }
  function draw(d) {
    drawLists();
    info.textContent = `queue "${d.queue}": pool of ${d.size}, ${d.running} running; ` +
        `${d.done} done, ${d.failed} failed, ${d.hung} hung (back after ${d.timeout_ms / 1000} s or a sweep)`;
    for (const k of ['size', 'latency_ms', 'fail_pct', 'hang_pct'])
      if (!edited.has(k)) pool.elements[k].value = d[k];
  }
  async function show() {
    try { draw((await api('GET', '/v1/demo')).data); } catch (e) { info.textContent = e.message; }
  }
  demoDraw = draw;
  demoLists = drawLists;
  enq.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const q = new URLSearchParams({ n: enq.elements.n.value, kind: enq.elements.kind.value });
    try {
      const r = await api('POST', '/v1/demo/enqueue?' + q);
      toast(`enqueued ${r.data.enqueued} ${enq.elements.kind.value} job(s)`);
    } catch (e) { toast(e.message, true); }
  });
  pool.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const q = new URLSearchParams();
    for (const k of ['size', 'latency_ms', 'fail_pct', 'hang_pct']) q.set(k, pool.elements[k].value);
    try {
      await api('POST', '/v1/demo/pool?' + q);
      edited.clear();
      toast('worker pool set');
      show();
    } catch (e) { toast(e.message, true); }
  });
  show();
  return el('section', { class: 'demo', id: 'demo' },
    el('p', {}, el('b', {}, 'Demo: '), 'jobs flow through the queue "demo" below; failed jobs retry, hung ones time out and come back, ',
      'dead ones wait for a replay.'), enq, pool, info, lists);
}

function padHistory(h) {
  const v = (h || []).slice(-SPARK);
  while (v.length < SPARK) v.unshift(0);
  return v;
}

function insertSorted(body, tr, name) {
  for (const other of body.children) {
    if (other.dataset.queue > name) { body.insertBefore(tr, other); return; }
  }
  body.append(tr);
}

function queuePage(main, name, tab, offset) {
  tab = TABS.includes(tab) ? tab : 'ready';
  offset = Math.max(0, offset | 0);
  const head = el('div', { class: 'qhead' });
  const list = el('tbody');
  const feed = el('ol', { class: 'feed', id: 'feed' });
  const tabs = el('nav', { class: 'tabs' }, TABS.map(s =>
    el('a', { href: `#/q/${enc(name)}/${s}`, class: s === tab ? 'on' : '', 'data-tab': s }, s)));
  tabs.append(el('a', { href: `#/q/${enc(name)}/search`, class: 'searchlink', id: 'search-link' }, 'search payloads'));
  const pager = el('div', { class: 'pager' });
  // the rows' bulk selection: kept across live refreshes (by id)
  const selected = new Set();
  const allBox = el('input', { type: 'checkbox', id: 'select-all', title: 'select every job of the page',
    onchange: () => {
      for (const b of list.querySelectorAll('input.pick')) {
        b.checked = allBox.checked;
        if (allBox.checked) selected.add(b.dataset.id); else selected.delete(b.dataset.id);
      }
      drawBulk();
    } });
  const listHead = el('thead', {}, el('tr', {},
    canAct() ? el('th', { class: 'pick' }, allBox) : null,
    ['id', 'kind / payload', 'attempts', 'enqueued', 'started', 'finished', 'error', 'worker', '']
      .map(h => el('th', {}, h))));
  const bulk = el('div', { class: 'bulk', id: 'bulk' });
  function drawBulk() {
    const n = selected.size;
    const acts = [];
    if (tab === 'delayed') acts.push(['run now', 'made ready', id => ['POST', `/run-now`]]);
    if (UNFINISHED.includes(tab)) acts.push(['cancel', 'cancelled', id => ['POST', `/cancel`]]);
    if (tab === 'dead') acts.push(['replay', 'replayed', id => ['POST', `/replay`]]);
    if (['dead', 'cancelled'].includes(tab)) acts.push(['delete', 'deleted', id => ['DELETE', '']]);
    bulk.replaceChildren(...(n && canAct() ? [el('span', { id: 'bulk-count' }, `${n} selected`),
      ...acts.map(([verb, done, how]) => action(verb + ' selected', () => bulkAct(verb, done, how),
        verb === 'replay' || verb === 'run now' ? '' : 'danger'))] : []));
  }
  // run now: one request for them all (POST /v1/queues/{q}/run-now), which
  // says what became of each id
  async function bulkRunNow() {
    const ids = [...selected];
    try {
      const r = await api('POST', `/v1/queues/${enc(name)}/run-now`, JSON.stringify({ ids }));
      const count = (what) => r.data.results.filter(x => x.result === what).length;
      const parts = [`${plural(r.data.ran, 'job')} made ready`];
      if (count('not delayed')) parts.push(`${count('not delayed')} not delayed any more`);
      if (count('not found')) parts.push(`${count('not found')} not found`);
      const err = r.data.results.find(x => x.result === 'error');
      if (err) parts.push(`${count('error')} failed (${err.error})`);
      toast(parts.join('; '), r.data.ran === 0);
    } catch (e) {
      toast(e.message, true);
    }
    for (const id of ids) selected.delete(id);
    allBox.checked = false;
    drawBulk();
    refresh();
    loadHead();
  }
  async function bulkAct(verb, done, how) {
    if (verb === 'run now') return bulkRunNow();
    const ids = [...selected];
    const res = await Promise.allSettled(ids.map(id => {
      const [m, tail] = how(id);
      return api(m, `/v1/queues/${enc(name)}/jobs/${enc(id)}${tail}`);
    }));
    const ok = res.filter(r => r.status === 'fulfilled').length;
    const bad = res.filter(r => r.status === 'rejected');
    for (const id of ids) selected.delete(id);
    toast(`${plural(ok, 'job')} ${done}` +
      (bad.length ? `; ${bad.length} could not be (${bad[0].reason.message})` : ''), bad.length > 0 && ok === 0);
    allBox.checked = false;
    drawBulk();
    refresh();
    loadHead();
  }
  const settings = el('div', { class: 'settings', id: 'settings' });
  const procs = el('div', { class: 'qprocs', id: 'queue-processes' });
  const shards = el('div', { class: 'shards', id: 'shards' });
  const groups = el('div', { class: 'groups', id: 'groups' });
  const batches = el('div', { class: 'batches', id: 'batches' });
  const enqueueForm = canAct() ? el('form', { class: 'enqueue', id: 'enqueue' },
    el('textarea', { name: 'payload', rows: 2, placeholder: 'payload (text or JSON)' }),
    el('label', {}, 'priority ', el('input', { name: 'priority', type: 'number', value: 0 })),
    el('label', {}, 'delay ms ', el('input', { name: 'delay', type: 'number', value: 0, min: 0 })),
    el('button', { type: 'submit', 'data-action': 'enqueue' }, 'enqueue')) : null;
  if (enqueueForm) enqueueForm.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const f = new FormData(enqueueForm);
    const qs = new URLSearchParams({ priority: f.get('priority') || 0, delay: f.get('delay') || 0 });
    try {
      const r = await api('POST', `/v1/queues/${enc(name)}/jobs?${qs}`, f.get('payload'));
      toast(`enqueued job ${r.data.id}`);
    } catch (e) { toast(e.message, true); }
  });
  const charts = historyCharts(name);
  // while Redis is unreachable: the job rows, charts, settings and
  // processes read before are hidden (.stale, style.css), not shown as live
  const staleNote = el('p', { class: 'warning bad', id: 'queue-stale', hidden: true });
  const page = el('div', { class: 'qpage', id: 'queue-page' },
    el('p', { class: 'crumbs' }, el('a', { href: '#/' }, 'queues'), ' / ', name),
    head, staleNote, shards, groups, batches, charts, enqueueForm, tabs,
    el('div', { class: 'cols' },
      el('div', { class: 'jobs' }, bulk, el('table', { class: 'ids rows' }, listHead, list), pager),
      el('div', { class: 'side' }, el('h3', {}, 'settings'), settings,
        el('h3', {}, 'processes'), procs,
        el('h3', {}, 'live events'), feed)));
  main.append(page);
  function markStale(down) {
    page.classList.toggle('stale', down);
    page.dataset.redis = down ? 'down' : 'up';
    staleNote.hidden = !down;
    staleNote.textContent = down ? `Redis unreachable${state.redisDownSince ? ' since ' + clock(state.redisDownSince) : ''}: ` +
      'the job lists, charts, settings and processes read before are hidden, not shown as live; ' +
      'they are read again when Redis is back.' : '';
  }
  markStale(!state.redis);

  // the processes running workers on this queue (a sharded queue: on its
  // shards) and the jobs each runs, as each said at its last liveness beat
  function drawProcs(list) {
    const mine = (qn) => qn === name || qn.startsWith(name + '~');
    const rows = [];
    for (const p of list) for (const q of p.queues) if (mine(q.queue)) rows.push([p, q]);
    if (!rows.length) {
      procs.replaceChildren(el('p', { class: 'muted' }, 'No process runs workers on this queue now.'));
      return;
    }
    procs.replaceChildren(el('table', { class: 'procs' }, el('tbody', {}, rows.map(([p, q]) =>
      el('tr', { 'data-process': p.id, 'data-queue': q.queue },
        el('td', {}, `${p.host} pid ${p.pid}` + (p.name ? ` (${p.name})` : '') + (q.queue !== name ? ` · ${q.queue}` : '')),
        el('td', { class: 'num', title: 'running / concurrency' }, `${q.running}/${q.concurrency}`),
        el('td', { class: 'jobids' }, q.jobs.length ? q.jobs.map(id =>
          el('a', { href: `#/q/${enc(name)}/job/${enc(id)}`, 'data-job': id }, id)) : el('span', { class: 'muted' }, 'idle')))))));
  }
  api('GET', '/v1/processes').then(r => drawProcs(r.data.processes)).catch(() => {});

  function drawHead(q) {
    const s = q.stats;
    head.replaceChildren(
      el('h1', {}, name, s.paused ? el('span', { class: 'badge paused', id: 'paused' }, 'paused') : ''),
      el('div', { class: 'stats' }, [...UNFINISHED, 'dead_depth', 'cancelled_depth',
        'completed', 'enqueued', 'failed', 'retried', 'reclaimed', 'replayed'].map(k =>
        el('div', { class: 'stat', 'data-stat': k }, el('b', {}, fmt(s[k])), ' ', k.replace('_depth', ''))),
        el('div', { class: 'stat' }, el('b', {}, fmt(q.rates.done)), ' done/s'),
        el('div', { class: 'stat' }, el('b', {}, ms(q.wait_ms)), ' wait'),
        el('div', { class: 'stat' }, el('b', {}, ms(q.run_ms)), ' run')),
      el('div', { class: 'actions' },
        s.paused ? action('resume', () => act('POST', `/v1/queues/${enc(name)}/resume`))
                 : action('pause', () => act('POST', `/v1/queues/${enc(name)}/pause`)),
        action('replay all dead', () => act('POST', `/v1/queues/${enc(name)}/replay`), 'warnbtn'),
        action('purge dead', () => confirmAct(`Delete every dead job of ${name}?`,
          'POST', `/v1/queues/${enc(name)}/purge?state=dead`), 'danger'),
        action('purge cancelled', () => confirmAct(`Delete every cancelled job of ${name}?`,
          'POST', `/v1/queues/${enc(name)}/purge?state=cancelled`), 'danger')));
  }

  async function act(method, path) {
    const r = await api(method, path);
    toast(actionToast(name, path, r.data));
    refresh();
    loadHead();
  }
  async function confirmAct(question, method, path) {
    if (window.confirm(question)) await act(method, path);
  }

  // GET /v1/queues/{q}/settings: pause state, limits, bound, schedules
  async function loadSettings() {
    try {
      const d = (await api('GET', `/v1/queues/${enc(name)}/settings`)).data;
      const row = (k, label, v) => el('tr', { 'data-setting': k }, el('th', {}, label), el('td', {}, v));
      const l = d.limits;
      settings.dataset.paused = String(d.paused);
      settings.replaceChildren(
        el('table', { class: 'kv' }, el('tbody', {},
          row('paused', 'state', d.paused ? 'paused' : 'running'),
          row('concurrency', 'concurrency limit', l.concurrency ? fmt(l.concurrency) : 'none'),
          row('rate', 'rate limit', l.rate ? `${fmt(l.rate)} per ${ms(l.rate_window_ms)}` : 'none'),
          row('max_waiting', 'bound (waiting jobs)', d.max_waiting ? fmt(d.max_waiting) : 'none'),
          row('dedup', 'dedup (ids kept reserved)', !d.dedup || !d.dedup.reserved ? 'none' :
            `${plural(d.dedup.reserved, 'id')} past their records; the next freed ` +
            new Date(d.dedup.next_release_ms).toISOString().replace('.000Z', 'Z')))),
        el('h4', {}, 'schedules'),
        d.schedules.length ? el('table', { class: 'schedules', id: 'schedules' }, el('tbody', {},
          d.schedules.map(x => el('tr', { 'data-schedule': x.name },
            el('td', {}, x.name), el('td', { class: 'muted' }, x.spec),
            el('td', { class: 'next' }, x.next_ms ? 'next ' + new Date(x.next_ms).toISOString().replace('.000Z', 'Z')
                                                  : 'no next fire time yet (no scheduler ran)')))))
          : el('p', { class: 'muted', id: 'no-schedules' }, 'no schedule'));
    } catch (e) {
      settings.replaceChildren(el('p', { class: 'bad' }, e.message));
    }
  }

  // a sharded queue: each shard's numbers and master (GET ?shards=1);
  // a shard opened on its own: which queue it belongs to
  function drawShards(q) {
    if (q.shard_of !== undefined) {
      shards.replaceChildren(el('p', { class: 'muted', id: 'shard-of' }, `shard ${q.shard} of `,
        el('a', { href: '#/q/' + enc(q.shard_of) }, q.shard_of),
        ' (its jobs are the sharded queue\'s: use that queue)'));
      return;
    }
    if (!(q.shards > 1) || !q.shard_stats) { shards.replaceChildren(); return; }
    const cols = [...UNFINISHED, 'dead_depth', 'completed', 'failed'];
    shards.replaceChildren(el('h3', {}, `${q.shards} shards`),
      el('table', { class: 'shardtable', id: 'shard-table' },
        el('thead', {}, el('tr', {}, ['shard', 'name', 'master', ...cols.map(k => k.replace('_depth', '')), '']
          .map(h => el('th', {}, h)))),
        el('tbody', {}, q.shard_stats.map(x => el('tr', { 'data-shard': x.index },
          el('td', { class: 'num' }, String(x.index)), el('td', {}, x.name),
          el('td', { class: 'muted' }, x.master || '–'),
          ...cols.map(k => el('td', { class: 'num', 'data-stat': k }, fmt(x.stats[k]))),
          el('td', {}, x.stats.paused ? el('span', { class: 'badge paused' }, 'paused') : ''))))));
  }
  let shardsAt = 0, shardsTimer = null;
  async function loadShards() {
    shardsAt = Date.now();
    try { drawShards((await api('GET', `/v1/queues/${enc(name)}?shards=1`)).data); } catch (e) { /* kept */ }
  }
  /* the shard table follows the stats every 2 s at most, and a change
   * within those 2 s is read when they end (stats events come only when
   * the numbers change: the last one must not be dropped) */
  function shardsSoon() {
    if (shardsTimer) return;
    shardsTimer = setTimeout(() => { shardsTimer = null; loadShards(); },
                             Math.max(0, 2000 - (Date.now() - shardsAt)));
  }
  // job groups (README "Groups"): the busiest (most ready jobs) with
  // their running jobs, limits and pause (GET /v1/queues/{q}/groups)
  const GROUPS_SHOWN = 10;
  const BATCHES_SHOWN = 20;
  // a group's starts/s: its started counter (GET .../groups: "started") read
  // twice, the increase over the interval (a counter that went down was set
  // back, README "Groups": counted from 0, as for the queue's rates)
  let startedPrev = new Map(), startedAt = 0;
  function startRates(d, at) {
    const dt = (at - startedAt) / 1000, rates = new Map(), next = new Map();
    for (const g of d.groups) {
      const cur = g.started || 0;
      next.set(g.name, cur);
      if (startedPrev.has(g.name) && dt > 0) {
        const prev = startedPrev.get(g.name);
        rates.set(g.name, (cur >= prev ? cur - prev : cur) / dt);
      }
    }
    startedPrev = next; startedAt = at;
    return rates;
  }
  // a group's rate limit, short: 50/1s, 3/250ms, 10/2min ('–': none)
  function windowText(w) {
    if (w % 60000 === 0) return `${w / 60000}min`;
    if (w % 1000 === 0) return `${w / 1000}s`;
    return `${w}ms`;
  }
  const rateText = (g) => g.rate ? `${fmt(g.rate)}/${windowText(g.rate_window_ms)}` : '\u2013';
  function drawGroups(d) {
    if (!d || !d.groups || d.groups.length === 0) { groups.replaceChildren(); return; }
    const rates = startRates(d, Date.now());
    const gpath = (g, verb) => `/v1/queues/${enc(name)}/groups/${enc(g)}/${verb}`;
    groups.replaceChildren(el('h3', {}, `busiest groups (${plural(d.total, 'group')} with jobs` +
        (d.total > d.groups.length ? `, the first ${d.groups.length} shown` : '') + ')'),
      el('table', { class: 'grouptable', id: 'group-table' },
        el('thead', {}, el('tr', {}, ['group', 'ready', 'active', 'starts/s', 'concurrency', 'weight', 'rate', 'bound', '', '']
          .map(h => el('th', {}, h)))),
        el('tbody', {}, d.groups.map(g => el('tr', { 'data-group': g.name },
          el('td', {}, g.name),
          el('td', { class: 'num', 'data-stat': 'ready' }, fmt(g.depth)),
          el('td', { class: 'num', 'data-stat': 'active' }, fmt(g.active)),
          el('td', { class: 'num', 'data-stat': 'starts' },
             rates.has(g.name) ? rates.get(g.name).toFixed(1) : '\u2013'),
          el('td', { class: 'num' }, g.concurrency === null ? 'none' : fmt(g.concurrency)),
          el('td', { class: 'num' }, fmt(g.weight)),
          el('td', { class: 'num', 'data-stat': 'rate',
                     title: g.rate ? `at most ${plural(g.rate, 'start')} in any ${ms(g.rate_window_ms)}` : 'no rate limit' },
             rateText(g)),
          el('td', { class: 'num', 'data-stat': 'bound',
                     title: g.max_waiting ? `at most ${plural(g.max_waiting, 'ready job')}` : 'no bound' },
             g.max_waiting ? fmt(g.max_waiting) : '\u2013'),
          el('td', {}, g.paused ? el('span', { class: 'badge paused' }, 'paused') : ''),
          el('td', {}, g.paused ? action('resume', () => groupAct(g.name, gpath(g.name, 'resume')))
                                : action('pause', () => groupAct(g.name, gpath(g.name, 'pause')))))))));
  }
  async function groupAct(g, path) {
    const r = await api('POST', path);
    toast(`group ${g} ${r.data.paused ? 'paused' : 'resumed'}`);
    loadGroups();
  }
  let groupsAt = 0, groupsTimer = null;
  async function loadGroups() {
    groupsAt = Date.now();
    try {
      const d = (await api('GET', `/v1/queues/${enc(name)}/groups?limit=${GROUPS_SHOWN}`)).data;
      drawGroups(d);
    } catch (e) { groups.replaceChildren(); }
  }
  /* as the shard table: follows the stats every 2 s at most (a listing
   * reads a page of the groups' depth index, whatever their number) */
  function groupsSoon() {
    if (groupsTimer) return;
    groupsTimer = setTimeout(() => { groupsTimer = null; loadGroups(); },
                             Math.max(0, 2000 - (Date.now() - groupsAt)));
  }
  // the queue's batches, newest first (GET /v1/queues/{q}/batches: a page
  // of BATCHES_SHOWN, 'more' reads the next by its cursor), each a link to
  // its batch page; hidden while the queue has none. A refresh (loadHead,
  // after an action) reads as many rows as are shown, so the pages 'more'
  // added stay, and so does a 'more' still in flight when the refresh
  // starts (its page is counted in batchWant at the click: the refresh
  // reads it too); choosing a filter goes back to one page. batchSeq: a
  // reply a later read overtook is dropped (no row twice).
  let batchState = '', batchRows = [], batchNext = null, batchWant = BATCHES_SHOWN, batchSeq = 0;
  function drawBatches() {
    if (!batchRows.length && !batchState) { batches.replaceChildren(); return; }
    const filter = el('nav', { class: 'tabs', id: 'batch-filter' }, ['', 'pending', 'completed', 'dead'].map(st =>
      el('button', { type: 'button', class: st === batchState ? 'on' : '', 'data-state': st || 'any',
        'aria-pressed': String(st === batchState),
        onclick: () => { batchState = st; batchWant = BATCHES_SHOWN; loadBatches(); } }, st || 'any')));
    batches.replaceChildren(el('h3', {}, 'batches'), filter,
      batchRows.length ? el('table', { class: 'batchlist', id: 'batch-list' },
        el('thead', {}, el('tr', {}, ['batch', 'state', 'finished', 'completed', 'dead', 'cancelled', 'created']
          .map(h => el('th', {}, h)))),
        el('tbody', {}, batchRows.map(b => el('tr', { 'data-batch': b.batch },
          el('td', {}, el('a', { href: `#/q/${enc(name)}/batch/${enc(b.batch)}` }, b.batch)),
          el('td', {}, el('span', { class: 'badge st-' + b.state }, b.state)),
          el('td', { class: 'num', 'data-field': 'finished' },
            `${fmt(b.completed + b.dead + b.cancelled)} of ${fmt(b.total)}` + (b.sealed ? '' : ' (not sealed)')),
          el('td', { class: 'num' }, fmt(b.completed)),
          el('td', { class: 'num' }, fmt(b.dead)),
          el('td', { class: 'num' }, fmt(b.cancelled)),
          el('td', {}, clock(b.created_ms))))))
        : el('p', { class: 'muted', id: 'no-batches' }, `no ${batchState} batch`),
      ...(batchNext ? [el('button', { type: 'button', id: 'batches-more', onclick: () => {
        batchWant = batchRows.length + BATCHES_SHOWN; /* (a refresh meanwhile reads this page too) */
        loadBatches(batchNext);
      } }, 'more')] : []));
  }
  async function loadBatches(after) {
    const seq = ++batchSeq;
    const qs = new URLSearchParams({ limit: after ? BATCHES_SHOWN : Math.min(batchWant, 1000) });
    if (batchState) qs.set('state', batchState);
    if (after) qs.set('after', after);
    try {
      const d = (await api('GET', `/v1/queues/${enc(name)}/batches?${qs}`)).data;
      if (seq !== batchSeq) return;
      batchRows = after ? batchRows.concat(d.batches) : d.batches;
      batchNext = d.next;
      batchWant = Math.max(BATCHES_SHOWN, batchRows.length);
      drawBatches();
    } catch (e) { if (seq === batchSeq) batches.replaceChildren(); }
  }
  async function loadHead() {
    loadSettings();
    loadGroups();
    let sharded = false;
    try {
      const r = await api('GET', `/v1/queues/${enc(name)}?shards=1`);
      state.queues.set(name, r.data);
      drawHead(r.data);
      drawShards(r.data);
      shardsAt = Date.now();
      sharded = r.data.shards > 1;
    } catch (e) {
      head.replaceChildren(el('h1', {}, name), el('p', { class: 'bad' }, e.message));
    }
    /* (a sharded queue holds no batch: its batch calls are refused, 409) */
    if (!sharded) loadBatches();
  }

  let pending = null;
  // cursor paging: the cursors of the pages shown so far ('' the first);
  // null on a sharded queue (offsets, from the URL)
  const paging = { cursors: offset > 0 ? null : [''] };
  // listSeq: a reply a later read overtook is dropped (a refresh that
  // started before a page change must not draw the old page over the new)
  let listSeq = 0;
  async function refresh() {
    pending = null;
    const seq = ++listSeq;
    try {
      // by cursor (pages stay right while jobs move); by offset on a sharded queue
      const base = `/v1/queues/${enc(name)}/jobs?state=${tab}&limit=${PAGE}`;
      let r = null;
      if (paging.cursors && paging.shards === undefined) { /* (a sharded queue: offsets at once) */
        const known = state.queues.get(name);
        try { paging.shards = known ? known.shards : (await api('GET', `/v1/queues/${enc(name)}`)).data.shards; }
        catch (e) { paging.shards = 1; }
        if (paging.shards > 1) paging.cursors = null;
      }
      if (paging.cursors) {
        try { r = await api('GET', `${base}&after=${enc(paging.cursors[paging.cursors.length - 1])}`); }
        catch (e) { if (!/shard/.test(e.message)) throw e; paging.cursors = null; }
      }
      if (!r) r = await api('GET', `${base}&offset=${offset}`);
      if (seq !== listSeq) return;
      const jobs = r.data.jobs || r.data.ids.map(id => ({ id, state: tab }));
      const onPage = new Set(jobs.map(j => String(j.id)));
      for (const id of [...selected]) if (!onPage.has(id)) selected.delete(id);
      list.replaceChildren(...(jobs.length ? jobs.map(j => jobRow(name, j, tab, selected, () => {
        allBox.checked = jobs.length > 0 && selected.size === jobs.length;
        drawBulk();
      }, () => { refresh(); loadHead(); })) :
        [el('tr', {}, el('td', { class: 'muted', colspan: 10 }, `no ${tab} job`))]));
      allBox.checked = jobs.length > 0 && selected.size === jobs.length;
      drawBulk();
      if (paging.cursors) {
        const depth = paging.cursors.length;
        const go = (cursors) => () => { paging.cursors = cursors; refresh(); };
        pager.replaceChildren(
          depth > 1 ? el('a', { href: '#', id: 'page-first', onclick: (ev) => { ev.preventDefault(); go([''])(); } }, '« first') : '',
          depth > 1 ? el('a', { href: '#', id: 'page-back', onclick: (ev) => { ev.preventDefault(); go(paging.cursors.slice(0, -1))(); } }, ' ← back') : '',
          ` page ${depth} `,
          r.data.next ? el('a', { href: '#', id: 'page-more', onclick: (ev) => { ev.preventDefault(); go([...paging.cursors, r.data.next])(); } }, 'more →') : '');
        return;
      }
      pager.replaceChildren(
        offset > 0 ? el('a', { href: `#/q/${enc(name)}/${tab}/${Math.max(0, offset - PAGE)}` }, '← newer') : '',
        ` ${offset + 1}–${offset + r.data.ids.length} `,
        r.data.ids.length === PAGE ? el('a', { href: `#/q/${enc(name)}/${tab}/${offset + PAGE}` }, 'more →') : '');
    } catch (e) { if (seq === listSeq) toast(e.message, true); }
  }
  function soon() { if (!pending) pending = setTimeout(refresh, 300); }

  loadHead();
  refresh();
  connectEvents('queues=' + name + '&processes=1');
  return {
    onProcesses: drawProcs,
    // Redis gone: its figures of before are not shown as current; back: read again
    onServer(d, back) {
      markStale(!d.redis);
      if (!d.redis) {
        head.replaceChildren(el('h1', {}, name), el('p', { class: 'bad', id: 'queue-redis-down' },
          `Redis unreachable${state.redisDownSince ? ' since ' + clock(state.redisDownSince) : ''}: ` +
          'the queue\'s figures cannot be read (the server retries).'));
        shards.replaceChildren();
        groups.replaceChildren();
      } else if (back) {
        loadHead();
        refresh();
        charts.reload();
        api('GET', '/v1/processes').then(r => drawProcs(r.data.processes)).catch(() => {});
      }
    },
    onStats(q) {
      if (q.name !== name) return;
      if (settings.dataset.paused !== String(q.stats.paused)) loadSettings(); /* paused elsewhere */
      drawHead(q);
      groupsSoon();
      if (q.shards > 1) shardsSoon();
      if (q.shards > 1) soon(); /* (no job events from a sharded queue: the list follows its stats) */
    },
    onJob(e) {
      if (e.queue !== name) return;
      const li = el('li', { class: 'ev ' + e.event },
        el('span', { class: 'evname' }, e.event), ' ',
        el('a', { href: `#/q/${enc(name)}/job/${enc(e.id)}` }, e.id));
      feed.prepend(li);
      while (feed.children.length > 30) feed.lastChild.remove();
      soon();
    },
    close() {
      if (pending) clearTimeout(pending);
      if (shardsTimer) clearTimeout(shardsTimer);
      if (groupsTimer) clearTimeout(groupsTimer);
    },
  };
}

function jobActions(name, id, st, done) {
  const base = `/v1/queues/${enc(name)}/jobs/${enc(id)}`;
  const run = async (method, path, what) => {
    const r = await api(method, path);
    toast(`${what} ${id}` + (r.data && r.data.from ? ` (was ${r.data.from})` : ''));
    done();
  };
  return [
    st === 'delayed' ? action('run now', () => run('POST', base + '/run-now', 'made ready')) : null,
    UNFINISHED.includes(st) ? action('cancel', () => run('POST', base + '/cancel', 'cancelled'), 'danger') : null,
    st === 'dead' ? action('replay', () => run('POST', base + '/replay', 'replayed')) : null,
    ['dead', 'cancelled'].includes(st) ? action('delete', () => run('DELETE', base, 'deleted'), 'danger') : null,
  ];
}

function jobPage(main, name, id) {
  const box = el('div', { class: 'job' });
  main.append(el('p', { class: 'crumbs' }, el('a', { href: '#/' }, 'queues'), ' / ',
    el('a', { href: '#/q/' + enc(name) }, name), ' / ', id), box);
  async function load() {
    try {
      const r = await api('GET', `/v1/queues/${enc(name)}/jobs/${enc(id)}`);
      const j = r.data;
      let deps = { dependencies: [], dependents: [] };
      try { deps = (await api('GET', `/v1/queues/${enc(name)}/jobs/${enc(id)}/dependencies`)).data; } catch (e) { /* (an older server) */ }
      const row = (k, label, v) => el('tr', { 'data-field': k }, el('th', {}, label), el('td', {}, v));
      const dur = (a, b) => (a && b ? ms(b - a) : '–');
      // its batch, when it knows it: a member's (among its dependents until
      // it told the batch) or a completion job's (its header rjq.batch)
      const member = (deps.dependents || []).find(d => d.queue.startsWith('{b}'));
      const batch = member ? { queue: member.queue.slice(3), id: member.id }
        : j.headers && j.headers['rjq.batch'] ? { queue: name, id: j.headers['rjq.batch'] } : null;
      box.replaceChildren(
        el('h1', {}, 'job ', id, ' ', el('span', { class: 'badge st-' + j.state, id: 'jobstate' }, j.state)),
        el('div', { class: 'actions' }, jobActions(name, id, j.state, load)),
        el('table', { class: 'kv jobinfo', id: 'jobinfo' }, el('tbody', {},
          row('attempts', 'attempts', `${j.attempts} of ${j.max_attempts}`),
          row('enqueued', 'enqueued', when(j.enqueued_ms)),
          row('started', 'started (last attempt)', when(j.started_ms)),
          row('ended', 'finished', when(j.ended_ms)),
          row('wait', 'waited', dur(j.enqueued_ms, j.started_ms)),
          row('run', 'ran', dur(j.started_ms, j.ended_ms)),
          row('worker', 'worker', workerText(j.worker)),
          batch ? row('batch', 'batch', el('a', { id: 'batch-link', href: `#/q/${enc(batch.queue)}/batch/${enc(batch.id)}` },
            `${batch.id} (${batch.queue})`)) : null)),
        el('h3', {}, 'attempts'), attemptsTable(j.attempts_history || []),
        el('h3', {}, 'headers'), headersTable(j.headers || {}),
        el('h3', {}, 'dependencies'), dependenciesTable(deps.dependencies || []),
        el('h3', {}, 'dependents'), dependentsList(deps.dependents || []),
        el('h3', {}, 'error'), j.error === null ? el('span', { class: 'muted' }, 'none') : bytesView(j.error),
        el('h3', {}, 'payload'), bytesView(j.payload),
        el('h3', {}, 'result'), bytesView(j.result));
    } catch (e) {
      box.replaceChildren(el('h1', {}, 'job ', id), el('p', { class: 'bad' }, e.message));
    }
  }
  load();
  connectEvents('queues=' + name);
  return { onJob(e) { if (e.queue === name && e.id === id) load(); } };
}

// The jobs a job waits for (rjq_job_options.after): their state now and
// how the job counted each.
function dependenciesTable(list) {
  if (!list.length) return el('p', { class: 'muted', id: 'dependencies' }, 'none');
  const link = d => el('a', { href: `#/q/${enc(d.queue)}/job/${enc(d.id)}` }, `${d.queue}:${d.id}`);
  return el('table', { class: 'kv dependencies', id: 'dependencies' },
    el('thead', {}, el('tr', {}, ['job', 'state', 'counted as', 'error'].map(h => el('th', {}, h)))),
    el('tbody', {}, list.map(d => el('tr', { 'data-dep': `${d.queue}:${d.id}` },
      el('td', {}, link(d)), el('td', {}, el('span', { class: 'badge st-' + d.state }, d.state)),
      el('td', {}, d.counted), el('td', {}, d.error === null ? '–' : d.error)))));
}

// The jobs waiting for this one that it has not released yet (and its
// batch, "{b}<batch queue>", until it told it).
function dependentsList(list) {
  if (!list.length) return el('p', { class: 'muted', id: 'dependents' }, 'none waiting');
  return el('ul', { class: 'dependents', id: 'dependents' }, list.map(d => d.queue.startsWith('{b}')
    ? el('li', { 'data-batch': `${d.queue.slice(3)}:${d.id}` }, 'batch ',
      el('a', { href: `#/q/${enc(d.queue.slice(3))}/batch/${enc(d.id)}` }, `${d.id} (${d.queue.slice(3)})`))
    : el('li', { 'data-dep': `${d.queue}:${d.id}` },
      el('a', { href: `#/q/${enc(d.queue)}/job/${enc(d.id)}` }, `${d.queue}:${d.id}`))));
}

// ---- a batch (GET /v1/queues/{q}/batches/{id}) ------------------------------

// Its state, counts and completion jobs; read again on its queue's job
// events (its completion jobs) and every 2 s while pending (its members
// may be on other queues).
function batchPage(main, name, id) {
  const box = el('div', { class: 'batch' });
  const path = `/v1/queues/${enc(name)}/batches/${enc(id)}`;
  let timer = null;
  main.append(el('p', { class: 'crumbs' }, el('a', { href: '#/' }, 'queues'), ' / ',
    el('a', { href: '#/q/' + enc(name) }, name), ' / batch ', id), box);
  async function load() {
    if (timer) clearTimeout(timer);
    timer = null;
    try {
      const b = (await api('GET', path)).data;
      const row = (k, label, v) => el('tr', { 'data-field': k }, el('th', {}, label), el('td', {}, v));
      const done = b.completed + b.dead + b.cancelled;
      const del = action('delete', async () => {
        if (b.state === 'pending' && !confirm(`batch ${id} is pending: delete it all the same?`)) return;
        await api('DELETE', path + (b.state === 'pending' ? '?force=1' : ''));
        toast(`deleted batch ${id}`);
        location.hash = '#/q/' + enc(name);
      }, 'danger');
      box.replaceChildren(
        el('h1', {}, 'batch ', id, ' ', el('span', { class: 'badge st-' + b.state, id: 'batchstate' }, b.state)),
        el('div', { class: 'actions' }, del),
        el('div', { class: 'bar', id: 'batch-bar', title: `${done} of ${b.total} finished` },
          ['completed', 'dead', 'cancelled'].map(k => {
            const seg = el('span', { class: 'seg st-' + k, 'data-seg': k });
            seg.style.width = `${b.total ? (100 * b[k] / b.total) : 0}%`; /* (CSSOM: the CSP allows no inline style) */
            return seg;
          })),
        el('table', { class: 'kv batchinfo', id: 'batchinfo' }, el('tbody', {},
          row('sealed', 'sealed', b.sealed ? 'yes' : 'no (takes more members)'),
          row('total', 'members', String(b.total)),
          row('finished', 'finished', `${done} of ${b.total}`),
          row('completed', 'completed', String(b.completed)),
          row('dead', 'dead', String(b.dead)),
          row('cancelled', 'cancelled', String(b.cancelled)),
          row('created', 'created', when(b.created_ms)),
          row('ended', 'ended', when(b.ended_ms)))),
        el('h3', {}, 'completion jobs'), completionList(name, b));
      if (b.state === 'pending') timer = setTimeout(load, 2000);
    } catch (e) {
      box.replaceChildren(el('h1', {}, 'batch ', id), el('p', { class: 'bad', id: 'batch-error' }, e.message));
    }
  }
  load();
  connectEvents('queues=' + name);
  return {
    onJob(e) { if (e.queue === name && e.id.startsWith(`batch:${id}:`)) load(); },
    close() { if (timer) clearTimeout(timer); timer = null; },
  };
}

// A batch's completion jobs: a link once enqueued, else when it will be.
function completionList(name, b) {
  if (!b.completion.length) return el('p', { class: 'muted', id: 'completion' }, 'none');
  return el('ul', { class: 'completion', id: 'completion' }, b.completion.map(c => el('li', { 'data-on': c.on },
    `on ${c.on}: `, c.enqueued ? el('a', { href: `#/q/${enc(name)}/job/${enc(c.id)}` }, c.id)
      : el('span', { class: 'muted' }, b.state === 'pending' ? `${c.id} (when it ends)` : `${c.id} (not enqueued: a member died)`))));
}

// A job's headers (traceparent, tracestate, the producer's own keys).
function headersTable(h) {
  const keys = Object.keys(h);
  if (!keys.length) return el('p', { class: 'muted', id: 'headers' }, 'none');
  return el('table', { class: 'kv headers', id: 'headers' }, el('tbody', {},
    keys.map(k => el('tr', { 'data-header': k }, el('th', {}, k), el('td', { class: 'mono' }, h[k])))));
}

// A job's attempts, oldest first: start, end, run time, worker, outcome.
function attemptsTable(list) {
  if (!list.length) return el('p', { class: 'muted', id: 'attempts' }, 'not run yet');
  return el('table', { class: 'kv attempts', id: 'attempts' },
    el('thead', {}, el('tr', {}, ['#', 'started', 'ended', 'ran', 'worker', 'outcome'].map(h => el('th', {}, h)))),
    el('tbody', {}, list.map((a, i) => el('tr', { 'data-outcome': a.outcome },
      el('td', { class: 'num' }, String(i + 1)), el('td', {}, when(a.started_ms)), el('td', {}, when(a.ended_ms)),
      el('td', {}, a.started_ms && a.ended_ms ? ms(a.ended_ms - a.started_ms) : '–'),
      el('td', {}, workerText(a.worker)),
      el('td', { class: 'outcome ' + (a.outcome === 'completed' ? 'good' : a.outcome === 'running' ? '' : 'bad') }, a.outcome)))));
}

// ---- job rows (GET /v1/queues/{q}/jobs: rows.c) -------------------------

function plural(n, what, many) { return `${n} ${n === 1 ? what : (many || what + 's')}`; }

// A server time (ms) as the time of day, the date too when not today.
function clock(t) {
  const d = new Date(t), now = new Date();
  const hms = d.toLocaleTimeString('en-GB', { hour12: false });
  return d.toDateString() === now.toDateString() ? hms : `${d.toISOString().slice(0, 10)} ${hms}`;
}

// A server time (ms): how long ago, the exact time as its title; '–' when none.
function when(t) {
  if (!t) return el('span', { class: 'muted' }, '–');
  const iso = new Date(t).toISOString();
  return el('time', { datetime: iso, title: iso }, ago(t));
}

function workerText(w) {
  if (!w) return el('span', { class: 'muted' }, '–');
  if (w.host !== null && w.host !== undefined) return el('span', { title: 'client ' + w.client }, `${w.host} pid ${w.pid}`);
  return el('span', { class: 'muted', title: 'process not listed (gone)' }, 'client ' + w.client);
}

function jobRow(name, j, tab, selected, onPick, done) {
  const id = typeof j.id === 'string' ? j.id : JSON.stringify(j.id);
  /* a server-assigned id of a sharded queue names a job of one shard: its route (rows.c) */
  if (j.shard_queue) name = j.shard_queue;
  const href = `#/q/${enc(name)}/job/${enc(id)}`;
  const pick = canAct() ? el('td', { class: 'pick' }, el('input', { type: 'checkbox', class: 'pick', 'data-id': id,
    onchange: (ev) => { if (ev.target.checked) selected.add(id); else selected.delete(id); onPick(); } })) : null;
  if (pick && selected.has(id)) pick.firstChild.checked = true;
  if (j.state === null) /* gone since it was listed */
    return el('tr', { 'data-id': id, class: 'gone' }, pick, el('td', {}, id),
      el('td', { class: 'muted', colspan: 8 }, 'gone (finished and expired, or deleted)'));
  const what = j.kind !== null && j.kind !== undefined ? el('span', { class: 'kind' }, j.kind)
    : j.preview !== null && j.preview !== undefined ? el('code', { class: 'preview' }, j.preview)
    : el('span', { class: 'muted' }, j.payload_bytes !== undefined ? `${fmt(j.payload_bytes)} bytes (binary)` : '–');
  const moved = j.state && j.state !== tab ? el('span', { class: 'badge st-' + j.state }, j.state) : '';
  return el('tr', { 'data-id': id, 'data-state': j.state || tab }, pick,
    el('td', {}, el('a', { href }, id), ' ', moved),
    el('td', { class: 'what' }, what),
    el('td', { class: 'num attempts' }, j.attempts !== undefined ? `${j.attempts}/${j.max_attempts}` : '–'),
    el('td', { class: 'enqueued' }, when(j.enqueued_ms)),
    el('td', { class: 'started' }, when(j.started_ms)),
    el('td', { class: 'ended' }, when(j.ended_ms)),
    el('td', { class: 'error' + (j.error ? ' bad' : ''), title: j.error || '' }, j.error || ''),
    el('td', { class: 'worker' }, workerText(j.worker)),
    el('td', { class: 'rowacts' }, jobActions(name, id, tab, done)));
}

// A queue action's answer in words ("3 jobs replayed", "queue paused").
function actionToast(name, path, d) {
  if (path.endsWith('/pause')) return d.changed ? `${name} paused` : `${name} was already paused`;
  if (path.endsWith('/resume')) return d.changed ? `${name} resumed` : `${name} was not paused`;
  if (d.replayed !== undefined) return `${plural(d.replayed, 'job')} replayed`;
  if (d.deleted !== undefined) return `${plural(d.deleted, 'job')} deleted`;
  if (d.reclaimed !== undefined) return `${plural(d.reclaimed, 'job')} reclaimed`;
  return 'done';
}

function ago(msEpoch) {
  const s = Math.max(0, (Date.now() - msEpoch) / 1000);
  if (s < 90) return Math.round(s) + ' s ago';
  if (s < 5400) return Math.round(s / 60) + ' min ago';
  if (s < 172800) return Math.round(s / 3600) + ' h ago';
  return Math.round(s / 86400) + ' days ago';
}

function processesPage(main) {
  const box = el('div', { id: 'processes' });
  main.append(el('h1', {}, 'Processes'),
    el('p', { class: 'muted' }, 'Processes running workers, as each said at its last liveness beat (every second).'),
    box);
  function draw(list) {
    if (!list.length) {
      box.replaceChildren(el('p', { class: 'muted' }, 'No process runs workers now.'));
      return;
    }
    box.replaceChildren(el('table', { class: 'procs' },
      el('thead', {}, el('tr', {}, ['process', 'host', 'pid', 'name', 'started', 'queue',
        'concurrency', 'running', 'jobs'].map(h => el('th', {}, h)))),
      el('tbody', {}, list.flatMap(p => {
        const qs = p.queues.length ? p.queues : [null];
        return qs.map((q, i) => el('tr', { 'data-process': p.id },
          i === 0 ? [el('td', {}, p.id), el('td', {}, p.host), el('td', { class: 'num' }, p.pid),
            el('td', {}, p.name || '–'), el('td', {}, ago(p.started_ms))]
                  : [el('td'), el('td'), el('td'), el('td'), el('td')],
          q ? [el('td', {}, el('a', { href: '#/q/' + enc(q.queue) }, q.queue)),
               el('td', { class: 'num' }, q.concurrency), el('td', { class: 'num' }, q.running),
               el('td', { class: 'jobids' }, q.jobs.map(id =>
                 el('a', { href: `#/q/${enc(q.queue)}/job/${enc(id)}` }, id)))]
            : [el('td', { class: 'muted' }, 'no queue')]));
      }))));
  }
  api('GET', '/v1/processes').then(r => draw(r.data.processes)).catch(e => toast(e.message, true));
  connectEvents('processes=1&jobs=0');
  return { onProcesses: draw };
}

// ---- search (search.c) ----------------------------------------------------

// The header's box: a job by its exact id, in the queue on screen, else in
// every queue served (one GET each, at once); its page, or "no job" said.
async function findById() {
  const input = document.getElementById('find-id');
  const msg = document.getElementById('find-msg');
  const id = input.value.trim();
  msg.textContent = '';
  msg.className = 'find-msg';
  if (!id) return;
  const parts = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  const names = parts[0] === 'q' && parts[1] ? [parts[1]] : Array.from(state.queues.keys());
  if (!names.length) {
    msg.textContent = 'no queue to look in';
    msg.className = 'find-msg bad';
    return;
  }
  // each queue: its name when the job is there, null for a 404, else the error
  const found = await Promise.all(names.map(q =>
    api('GET', `/v1/queues/${enc(q)}/jobs/${enc(id)}`).then(() => q, e => (e.status === 404 ? null : e))));
  const q = found.find(x => typeof x === 'string');
  const err = found.find(x => x instanceof Error);
  if (q) {
    input.value = '';
    location.hash = `#/q/${enc(q)}/job/${enc(id)}`;
  } else if (err) {
    msg.textContent = `could not look for ${id}: ${err.message}`;
    msg.className = 'find-msg bad';
  } else {
    msg.textContent = names.length === 1 ? `no job ${id} in ${names[0]}` : `no job ${id} in any queue`;
    msg.className = 'find-msg bad';
  }
}

// A payload search: started (POST), followed (GET ?from=, every 250 ms while
// it runs), cancelled (DELETE). sid: a search to follow (#/q/Q/search/ID).
function searchPage(main, name, sid) {
  const text = el('input', { id: 'search-text', name: 'text', placeholder: 'text in the payloads', autocomplete: 'off', required: true });
  // a box per state the server searches (search.c), in rjq top's order;
  // all ticked, as its default
  const boxes = [...UNFINISHED, 'dead', 'cancelled', 'completed'].map(s =>
    el('label', { class: 'stbox', 'data-state': s },
      el('input', { type: 'checkbox', name: 'state', value: s, checked: true }), ' ', s));
  const field = el('input', { id: 'search-field', name: 'field', placeholder: 'JSON field (indexed)', autocomplete: 'off',
    pattern: '[A-Za-z0-9_.\\-]{1,64}', title: 'look the text up as this field\'s value in the queue\'s index (rjq index)' });
  const count = el('input', { id: 'search-count', type: 'number', min: 1, max: 1000, value: 100,
    title: 'payloads read by each step (one short Redis call)' });
  const startBtn = el('button', { type: 'submit', id: 'search-start' }, 'search');
  const cancelBtn = el('button', { type: 'button', id: 'search-cancel', class: 'danger', disabled: true }, 'cancel');
  const bar = el('progress', { id: 'search-progress', max: 1, value: 0 });
  const status = el('span', { id: 'search-status', class: 'muted' }, 'not started');
  const rows = el('tbody');
  const table = el('table', { class: 'ids rows', id: 'search-matches' },
    el('thead', {}, el('tr', {}, ['id', 'state'].map(h => el('th', {}, h)))), rows);
  const how = el('span', { id: 'search-index', class: 'muted' });
  const form = el('form', { class: 'search', id: 'search-form' }, text, ' ', field, ' ', startBtn, ' ', cancelBtn,
    el('div', { class: 'states' }, boxes, el('label', { class: 'stbox' }, 'payloads a step ', count)));
  main.append(el('p', { class: 'crumbs' }, el('a', { href: '#/' }, 'queues'), ' / ',
    el('a', { href: '#/q/' + enc(name) }, name), ' / search'),
    el('h1', {}, 'search the payloads of ', name), form,
    el('div', { class: 'progress' }, bar, ' ', status), el('p', {}, how), table);
  let cur = null, got = 0, timer = null, closed = false;

  function draw(d) {
    const total = Math.max(d.total, d.scanned, 1);
    bar.max = total;
    bar.value = Math.min(d.scanned, total);
    const pct = d.state === 'done' ? 100 : Math.min(99, Math.floor(100 * d.scanned / total));
    status.textContent = `${d.state} · ${fmt(d.scanned)} of ${fmt(d.total)} jobs read (${pct}%) · ` +
      `${plural(d.found, 'match', 'matches')}${d.truncated ? ' (stopped at the cap)' : ''} · ${ms(d.elapsed_ms)}`;
    status.className = d.state === 'failed' ? 'bad' : 'muted';
    status.dataset.state = d.state;
    // by an indexed field: whether the index answered, or why it scanned
    how.textContent = !d.field ? '' : d.index.used && !d.index.note
      ? `looked up in the index of ${d.field}: O(matches), no scan`
      : `${d.field}: ${d.index.note || 'by the index'}`;
    how.dataset.index = d.field ? (d.index.used && !d.index.note ? 'used' : 'scan') : '';
    for (const m of d.matches) {
      rows.append(el('tr', { 'data-id': m.id },
        el('td', {}, el('a', { href: `#/q/${enc(name)}/job/${enc(m.id)}` }, m.id)),
        el('td', {}, el('span', { class: 'badge st-' + m.state }, m.state))));
    }
    got += d.matches.length;
    const running = d.state === 'running';
    cancelBtn.disabled = !running;
    startBtn.disabled = running;
  }
  async function poll() {
    timer = null;
    if (!cur || closed) return;
    try {
      const r = await api('GET', `/v1/queues/${enc(name)}/search/${enc(cur)}?from=${got}`);
      if (closed) return;
      draw(r.data);
      if (r.data.state === 'running' || got < r.data.found) timer = setTimeout(poll, 250);
    } catch (e) { toast(e.message, true); startBtn.disabled = false; cancelBtn.disabled = true; }
  }
  function follow(id) {
    cur = id; got = 0;
    rows.replaceChildren();
    if (timer) clearTimeout(timer);
    poll();
  }
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const states = boxes.map(b => b.firstChild).filter(b => b.checked).map(b => b.value);
    if (!states.length) { toast('pick at least one state', true); return; }
    try {
      const by = field.value ? `&field=${enc(field.value)}` : '';
      const r = await api('POST', `/v1/queues/${enc(name)}/search?text=${enc(text.value)}${by}&states=${states.join(',')}&count=${enc(count.value)}`);
      history.replaceState(null, '', `#/q/${enc(name)}/search/${enc(r.data.search)}`);
      follow(r.data.search);
    } catch (e) { toast(e.message, true); }
  });
  cancelBtn.addEventListener('click', async () => {
    if (!cur) return;
    try {
      await api('DELETE', `/v1/queues/${enc(name)}/search/${enc(cur)}`);
      toast('search cancelled');
      if (!timer) poll();
    } catch (e) { toast(e.message, true); }
  });
  if (sid) follow(sid);
  text.focus();
  return { close() { closed = true; if (timer) clearTimeout(timer); } };
}

// ---- token, routing, start -----------------------------------------------

function askToken() {
  const main = document.getElementById('main');
  if (document.getElementById('tokenform')) return;
  const input = el('input', { type: 'password', name: 'token', autocomplete: 'off', placeholder: 'token' });
  const form = el('form', { id: 'tokenform', class: 'token' },
    el('p', {}, 'This server needs a token (rjq serve --token-file).'), input,
    el('button', { type: 'submit' }, 'use it'));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    state.token = input.value.trim();
    sessionStorage.setItem('rjq-token', state.token);
    start();
  });
  main.replaceChildren(form);
}

function route() {
  if (!state.server) return;
  if (state.view && state.view.close) state.view.close();
  const main = document.getElementById('main');
  main.replaceChildren();
  const parts = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  if (parts[0] === 'processes')
    state.view = processesPage(main);
  else if (parts[0] === 'q' && parts[1] && parts[2] === 'search')
    state.view = searchPage(main, parts[1], parts.slice(3).join('/'));
  else if (parts[0] === 'q' && parts[1] && parts[2] === 'job' && parts[3] !== undefined)
    state.view = jobPage(main, parts[1], parts.slice(3).join('/'));
  else if (parts[0] === 'q' && parts[1] && parts[2] === 'batch' && parts[3] !== undefined)
    state.view = batchPage(main, parts[1], parts.slice(3).join('/'));
  else if (parts[0] === 'q' && parts[1])
    state.view = queuePage(main, parts[1], parts[2], parseInt(parts[3] || '0', 10));
  else
    state.view = overview(main);
}

async function start() {
  try {
    const r = await api('GET', '/v1/server');
    state.server = r.data;
    state.redis = r.data.redis !== false;
    state.redisDownSince = r.data.redis_down_since_ms || null;
    const info = document.getElementById('info');
    info.textContent = `rjq ${r.data.version}` + (r.data.read_only ? ' · read-only' : '') +
      (r.data.queues !== '*' ? ` · queues ${r.data.queues}` : '');
    document.body.classList.toggle('readonly', !!r.data.read_only);
    route();
  } catch (e) {
    if (!document.getElementById('tokenform'))
      document.getElementById('main').replaceChildren(el('p', { class: 'bad' }, e.message));
  }
}

window.addEventListener('hashchange', route);
document.getElementById('find').addEventListener('submit', (ev) => { ev.preventDefault(); findById(); });
start();
