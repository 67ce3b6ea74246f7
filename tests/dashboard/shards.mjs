// The dashboard with a sharded queue, in a real browser (Debian's chromium,
// driven by playwright-core): run by tests/dashboard_shards.sh, which
// declares "hot" with 3 shards, writes a plain queue "cold" and starts the
// server. Env: BASE, CHROMIUM, ART (screenshots folder).
import { chromium } from 'playwright-core';

const { BASE, CHROMIUM, ART } = process.env;
let failures = 0, checks = 0;
function check(ok, what) {
  checks++;
  if (!ok) { failures++; console.log('FAIL: ' + what); }
}
async function api(method, path, body) {
  const r = await fetch(BASE + path, { method, body });
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
const num = (t) => Number(String(t).replace(/,/g, ''));

const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
const consoleErrors = [];
page.on('console', m => { if (m.type() === 'error') consoleErrors.push(m.text()); });
page.on('pageerror', e => consoleErrors.push(String(e)));

try {
  for (let i = 0; i < 6; i++) {
    const r = await api('POST', '/v1/queues/hot/jobs', `job-${i}`);
    check(r.status === 201, `enqueue ${i}: ${r.status}`);
  }
  const one = await api('GET', '/v1/queues/hot?shards=1');
  check(one.status === 200 && one.data.shard_stats.length === 3, 'the API has 3 shards');
  const shardNames = one.data.shard_stats.map(x => x.name);

  // ---- overview: one row for the sharded queue, with its shard count ----
  await page.goto(BASE + '/');
  await until('the overview lists hot and cold', async () =>
    (await page.locator('tr[data-queue="hot"]').count()) === 1 &&
    (await page.locator('tr[data-queue="cold"]').count()) === 1);
  await until('hot: 6 ready (summed over its shards)', async () =>
    num(await page.locator('tr[data-queue="hot"] td').nth(1).textContent()) === 6);
  check((await page.locator('tr[data-queue="hot"] .badge.shards').textContent()) === '3 shards',
        'the row says 3 shards');
  check((await page.locator('tr[data-queue="cold"] .badge.shards').count()) === 0,
        'a plain queue has no shard badge');
  check((await page.locator('tr[data-queue*="~"]').count()) === 0, 'no row for a shard');
  await page.screenshot({ path: `${ART}/dashboard-shards-overview.png`, fullPage: true });

  // ---- the queue page: the per-shard table ----
  await page.click('tr[data-queue="hot"] a.qname');
  await until('the page shows the shard table', async () =>
    (await page.locator('#shard-table tbody tr').count()) === 3);
  const names = await page.locator('#shard-table tbody tr td:nth-child(2)').allTextContents();
  check(JSON.stringify(names) === JSON.stringify(shardNames), 'the shards\' names: ' + names.join(' '));
  const masters = await page.locator('#shard-table tbody tr td:nth-child(3)').allTextContents();
  check(masters.every(m => /^127\.0\.0\.1:\d+$|^\//.test(m)), 'each shard\'s master: ' + masters.join(' '));
  const ready = async () => (await page.locator('#shard-table td[data-stat="ready"]').allTextContents()).map(num);
  check((await ready()).reduce((a, b) => a + b, 0) === 6, 'the shards\' ready add up to 6');
  // enqueue from the page: the breakdown follows without reload
  await page.fill('#enqueue textarea', 'from-the-page');
  await page.click('#enqueue button[data-action="enqueue"]');
  await until('the shards\' ready add up to 7', async () => (await ready()).reduce((a, b) => a + b, 0) === 7);
  await until('the head says 7 ready', async () =>
    num(await page.locator('.stat[data-stat="ready"] b').textContent()) === 7);
  check((await page.locator('#settings .bad').count()) === 0, 'the settings of a sharded queue load');
  // jobs waiting for cold's c1 (no worker): each shard's waiting column, summed in the head
  for (const id of ['w1', 'w2', 'w3']) {
    const r = await api('POST', `/v1/queues/hot/jobs?id=${id}&after=cold:c1`, 'waits');
    check(r.status === 201, `enqueue ${id} after cold:c1: ${r.status} ${JSON.stringify(r.data)}`);
  }
  const waiting = async () => (await page.locator('#shard-table td[data-stat="waiting"]').allTextContents()).map(num);
  await until('the shards\' waiting add up to 3', async () => (await waiting()).reduce((a, b) => a + b, 0) === 3);
  check((await page.locator('#shard-table thead th').allTextContents()).slice(3, 7).join(',') === 'ready,delayed,waiting,active',
        'the shard table\'s columns: ' + (await page.locator('#shard-table thead th').allTextContents()).join(','));
  await until('the head says 3 waiting', async () =>
    num(await page.locator('.stat[data-stat="waiting"] b').textContent()) === 3);
  await page.locator('.qhead').screenshot({ path: `${ART}/dashboard-shards-head.png` });
  await page.screenshot({ path: `${ART}/dashboard-shards-queue.png`, fullPage: true });
  // pause from the page: every shard paused
  await page.click('.actions button[data-action="pause"]');
  await until('every shard row says paused', async () => {
    return (await page.locator('#shard-table tbody tr .badge.paused').count()) === 3;
  });

  // ---- a shard opened on its own says which queue it belongs to ----
  await page.goto(`${BASE}/#/q/${encodeURIComponent(shardNames[0])}`);
  await until('a shard page names its queue', async () =>
    (await page.textContent('#shard-of')).includes('shard 0 of hot'));

  // ---- ids (docs/sharding.md 6a): the anonymous jobs' ids made by the
  // library, unique across shards; a job by such an id answers 200 ----
  const listed = await api('GET', '/v1/queues/hot/jobs?state=ready&limit=100');
  const ids = listed.data.ids;
  check(listed.status === 200 && ids.length === 7, 'the ready list: ' + ids.length + ' ids');
  check(new Set(ids).size === ids.length, 'no repeated id: ' + ids.join(' '));
  check(ids.every(x => !/^[0-9]+$/.test(x)), 'no all-digit id: ' + ids.join(' '));
  check((await api('GET', `/v1/queues/hot/jobs/${encodeURIComponent(ids[0])}`)).status === 200,
        'an anonymous job by its id: 200');
  await page.goto(`${BASE}/#/q/hot/job/${encodeURIComponent(ids[0])}`);
  await until('an anonymous job\'s page', async () => (await page.locator('#jobinfo').count()) === 1);
  // a job put on a shard directly keeps a server-assigned id: its row in
  // the queue's list links to its shard's route (no 409 page)
  const legacy = await api('POST', `/v1/queues/${encodeURIComponent(shardNames[0])}/jobs`, 'legacy');
  check(legacy.status === 201 && /^[0-9]+$/.test(legacy.data.id), 'a numeric id on a shard: ' + legacy.status);
  const rows = await api('GET', '/v1/queues/hot/jobs?state=ready&limit=100');
  const row = rows.data.jobs.find(j => j.id === legacy.data.id);
  check(row && row.shard === 0 && row.shard_queue === shardNames[0] && row.state === 'ready',
        'its row names its shard: ' + JSON.stringify(row));
  await page.goto(`${BASE}/#/q/hot/ready`);
  const link = page.locator(`tr[data-id="${legacy.data.id}"] td a`).first();
  await until('its row links to its shard\'s route', async () =>
    (await link.getAttribute('href')) === `#/q/${encodeURIComponent(shardNames[0])}/job/${legacy.data.id}`);
  await link.click();
  await until('its page opens from the shard', async () => (await page.locator('#jobinfo').count()) === 1);
  check((await page.locator('.job .bad').count()) === 0, 'no error on the legacy job\'s page');
  check(consoleErrors.length === 0, 'no console error: ' + consoleErrors.join(' | '));
} catch (e) {
  check(false, 'exception: ' + (e && e.stack || e));
  await page.screenshot({ path: `${ART}/dashboard-shards-failure.png`, fullPage: true }).catch(() => {});
} finally {
  await browser.close();
}
console.log(`${checks} checks, ${failures} failures`);
process.exit(failures ? 1 : 0);
