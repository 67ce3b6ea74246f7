// The dashboard of rjq serve in a real browser (Debian's chromium, driven
// by playwright-core): run by tests/dashboard.sh, which starts the servers.
// Env: BASE (read-write server), RO_BASE (read-only), TOKEN_BASE and TOKEN
// (a server with --token-file), CHROMIUM, ART (screenshots folder),
// REDIS_PID (stopped by the last step).
import { chromium } from 'playwright-core';

const { BASE, RO_BASE, TOKEN_BASE, TOKEN, DEMO_BASE, CHROMIUM, ART, REDIS_PID } = process.env;
let failures = 0, checks = 0;
function check(ok, what) {
  checks++;
  if (!ok) { failures++; console.log('FAIL: ' + what); }
}
async function api(base, method, path, body) {
  const r = await fetch(base + path, { method, body });
  return { status: r.status, data: await r.json().catch(() => null) };
}
async function until(what, fn, ms = 10000) {
  const end = Date.now() + ms;
  for (;;) {
    try { if (await fn()) { checks++; return true; } } catch (e) { /* not yet */ }
    if (Date.now() > end) { check(false, what); return false; }
    await new Promise(r => setTimeout(r, 100));
  }
}

const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
const consoleErrors = [];
page.on('console', m => { if (m.type() === 'error') consoleErrors.push(m.text()); });
page.on('pageerror', e => consoleErrors.push(String(e)));
page.on('dialog', d => d.accept());

try {
  // queues with something in them: "web" (a worker completes its jobs,
  // fails "fail..." ones for good) and "idle" (no worker)
  await api(BASE, 'POST', '/v1/queues/web/jobs?wait=10000', 'warm-up');
  const dead = await api(BASE, 'POST', '/v1/queues/web/jobs?wait=10000&attempts=1', 'fail-me');
  check(dead.status === 502, 'the failing job died (502): ' + dead.status);
  await api(BASE, 'POST', '/v1/queues/idle/jobs', '{"kind":"report","n":7}');

  // ---- overview: every queue, filled by the stream ----
  await page.goto(BASE + '/');
  await until('the overview lists web and idle',
    async () => (await page.locator('tr[data-queue="web"]').count()) === 1 &&
                (await page.locator('tr[data-queue="idle"]').count()) === 1);
  await until('the event stream is live', async () => (await page.textContent('#conn')) === 'live');
  const before = Number((await page.locator('tr[data-queue="web"] td[data-stat="completed"]').textContent()).replace(/,/g, ''));
  await api(BASE, 'POST', '/v1/queues/web/jobs?wait=10000', 'another');
  await until('the overview counts a completion without reload', async () =>
    Number((await page.locator('tr[data-queue="web"] td[data-stat="completed"]').textContent()).replace(/,/g, '')) > before);
  await until('the overview warns that Redis may evict jobs', async () => {
    await page.reload(); /* (the server reads Redis' memory every 2 s) */
    await page.waitForSelector('#queues');
    return (await page.locator('#evict-warning:not([hidden])').count()) === 1 &&
      (await page.textContent('#evict-warning')).includes('allkeys-lru');
  });
  await until('the overview shows Redis: version, role, clients, memory', async () => {
    const t = await page.textContent('#redis-health');
    return /Redis \d+\.\d+\.\d+ at 127\.0\.0\.1:\d+ · master · \d+ clients · [\d.]+ MB used/.test(t);
  });
  await page.screenshot({ path: `${ART}/dashboard-overview.png`, fullPage: true });

  // ---- enqueue from the page; the job completes without reload ----
  await page.click('tr[data-queue="web"] a.qname');
  await page.waitForSelector('#enqueue');
  await page.fill('#enqueue textarea', '{"from":"the page"}');
  await page.click('#enqueue button[data-action="enqueue"]');
  let id = null;
  await until('a toast names the enqueued job', async () => {
    const t = await page.locator('.toast').allTextContents();
    const m = t.map(s => /enqueued job (\S+)/.exec(s)).find(Boolean);
    if (m) id = m[1];
    return id !== null;
  });
  await until('the feed shows the job completed', async () =>
    (await page.locator(`#feed li.ev.completed a:text-is("${id}")`).count()) === 1);
  await page.click('.tabs a[data-tab="completed"]');
  await until('the completed tab lists the job', async () =>
    (await page.locator(`tr[data-id="${id}"]`).count()) === 1);
  await page.click(`tr[data-id="${id}"] a`);
  await until('the job page shows the result', async () =>
    (await page.textContent('#jobstate')) === 'completed' &&
    (await page.locator('pre[data-kind="json"]').first().textContent()).includes('"from": "the page"'));
  await page.screenshot({ path: `${ART}/dashboard-job.png`, fullPage: true });

  // ---- replay a dead job ----
  await page.goto(BASE + '/#/q/web/dead');
  const deadId = dead.data.id;
  await page.waitForSelector(`tr[data-id="${deadId}"] button[data-action="replay"]`);
  await page.screenshot({ path: `${ART}/dashboard-dead.png`, fullPage: true });
  await page.click(`tr[data-id="${deadId}"] button[data-action="replay"]`);
  await until('the replay is counted', async () =>
    (await api(BASE, 'GET', '/v1/queues/web')).data.stats.replayed === 1);

  // ---- pause a queue ----
  await page.goto(BASE + '/#/q/idle');
  await page.waitForSelector('button[data-action="pause"]');
  await page.click('button[data-action="pause"]');
  await until('the page shows the queue paused', async () => (await page.locator('#paused').count()) === 1);
  check((await api(BASE, 'GET', '/v1/queues/idle')).data.stats.paused === true, 'the queue is paused');
  // ---- its settings: state, limits, bound, schedules (set by dashboard.sh) ----
  await until('the settings say paused', async () =>
    (await page.textContent('#settings tr[data-setting="paused"] td')) === 'paused');
  check((await page.textContent('#settings tr[data-setting="concurrency"] td')) === '3',
    'the settings show the concurrency limit');
  check((await page.textContent('#settings tr[data-setting="rate"] td')) === 'none', 'no rate limit shown');
  check((await page.textContent('#settings tr[data-setting="max_waiting"] td')) === 'none', 'no bound shown');
  check((await page.textContent('#settings tr[data-setting="dedup"] td')) === 'none', 'no dedup reservation shown');
  check((await page.locator('#schedules tr[data-schedule="nightly"]').count()) === 1,
    'the settings list the schedule');
  check((await page.textContent('#schedules tr[data-schedule="nightly"]')).includes('cron 0 3 * * *'),
    'the schedule shows its spec');
  check(/no next fire time yet|next \d{4}-/.test(await page.textContent('#schedules tr[data-schedule="nightly"] .next')),
    'the schedule shows its next fire time or why not');
  await page.locator('#settings').screenshot({ path: `${ART}/dashboard-settings.png` });
  await page.goto(BASE + '/');
  await until('the overview shows it paused', async () =>
    (await page.locator('tr[data-queue="idle"] .badge.paused').count()) === 1);

  // ---- the processes page lists the worker, pushed by the stream ----
  await page.click('#nav-processes');
  await until('the processes page lists the worker of web', async () =>
    (await page.locator('#processes tr[data-process] a:text-is("web")').count()) === 1);
  await page.screenshot({ path: `${ART}/dashboard-processes.png`, fullPage: true });

  // ---- a payload that is JSON is pretty-printed ----
  const ready = (await api(BASE, 'GET', '/v1/queues/idle/jobs?state=ready')).data.ids[0];
  await page.goto(`${BASE}/#/q/idle/job/${ready}`);
  await until('a JSON payload is pretty-printed', async () =>
    (await page.locator('pre[data-kind="json"]').first().textContent()).includes('"kind": "report"'));

  // ---- the read-only page has no action ----
  await page.goto(RO_BASE + '/#/q/web');
  await page.waitForSelector('.stats');
  await page.goto(RO_BASE + '/#/q/web/dead');
  await until('the read-only page lists jobs', async () => (await page.locator('table.ids tr').count()) >= 1);
  check((await page.locator('button').count()) === 0, 'the read-only page has no button');
  check((await page.locator('#enqueue').count()) === 0, 'the read-only page has no enqueue form');
  check((await page.textContent('#info')).includes('read-only'), 'the read-only page says so');
  await page.screenshot({ path: `${ART}/dashboard-readonly.png`, fullPage: true });

  // ---- the demo: the pool set and jobs enqueued from the page run ----
  await page.goto(DEMO_BASE + '/');
  await page.waitForSelector('#demo-pool');
  for (const [k, v] of [['size', '4'], ['latency_ms', '5'], ['fail_pct', '0'], ['hang_pct', '0']])
    await page.fill(`#demo-pool input[name="${k}"]`, v);
  await page.click('#demo-pool button[data-action="demo-pool"]');
  await until('the pool is set', async () =>
    (await page.textContent('#demo-info')).includes('pool of 4'));
  await page.fill('#demo-enqueue input[name="n"]', '10');
  await page.selectOption('#demo-enqueue select', 'thumbnail');
  await page.click('#demo-enqueue button[data-action="demo-enqueue"]');
  await until('the demo queue completes the 10 jobs, shown without reload', async () =>
    Number((await page.locator('tr[data-queue="demo"] td[data-stat="completed"]').textContent()).replace(/,/g, '')) === 10);
  await until('the pool counts them', async () =>
    (await page.textContent('#demo-info')).includes('10 done'));
  await page.click('#demo button[data-action="demo-reclaim"]');
  await until('the sweep answers', async () =>
    (await page.locator('.toast').allTextContents()).some(t => t.startsWith('reclaim sweep')));
  await page.screenshot({ path: `${ART}/dashboard-demo.png`, fullPage: true });

  check(consoleErrors.length === 0, 'no console error: ' + consoleErrors.join(' | '));

  // ---- a token server asks for the token (its first request gets 401) ----
  await page.goto(TOKEN_BASE + '/');
  await page.waitForSelector('#tokenform');
  await page.fill('#tokenform input', TOKEN);
  await page.click('#tokenform button');
  await until('with the token the overview loads and goes live', async () =>
    (await page.locator('tr[data-queue="web"]').count()) === 1 &&
    (await page.textContent('#conn')) === 'live');

  // ---- Redis gone (the last step): the badge turns red, the overview says so ----
  await page.goto(BASE + '/');
  await until('the overview goes live', async () => (await page.textContent('#conn')) === 'live');
  process.kill(Number(REDIS_PID), 'SIGTERM');
  await until('the badge says redis down, in red', async () =>
    (await page.textContent('#conn')) === 'redis down' &&
    (await page.getAttribute('#conn', 'class')).includes('bad'));
  await until('the overview says Redis is unreachable', async () =>
    (await page.locator('#redis-down:not([hidden])').count()) === 1);
  await page.reload();
  await until('a reload with Redis down is red at once', async () =>
    (await page.textContent('#conn')) === 'redis down' &&
    (await page.textContent('#empty')).includes('Redis is unreachable'));
  await page.screenshot({ path: `${ART}/dashboard-redis-down.png`, fullPage: true });
} catch (e) {
  check(false, 'exception: ' + (e.stack || e));
  await page.screenshot({ path: `${ART}/dashboard-failure.png`, fullPage: true }).catch(() => {});
} finally {
  await browser.close();
}
console.log(`${checks} checks, ${failures} failures`);
process.exit(failures ? 1 : 0);
