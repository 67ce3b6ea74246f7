// The queue page's busiest job groups, in a real browser: run by
// tests/dashboard_groups.sh, which enqueues tenants' jobs in groups acme
// (7, 50 starts a second, bound 500), globex (3, concurrency 2) and
// initech (1, 3 starts per 250 ms), a plain queue's job, a sharded
// queue's (2 shards) groups s1..s4 (4..1 jobs; s3 2 starts a minute,
// bound 9), and starts rjq serve (a worker of queue runs only: the other
// jobs wait). Env: BASE, CHROMIUM, ART, RJQ.
import { check, api, until, openPage, shotShowsOn, finish } from './lib.mjs';

const { BASE, ART } = process.env;
const { browser, page, errors: consoleErrors } = await openPage();
const row = (g) => `#group-table tr[data-group="${g}"]`;
const cell = async (g, stat) => Number((await page.textContent(`${row(g)} td[data-stat="${stat}"]`)).replace(/,/g, ''));

try {
  await page.goto(BASE + '/#/q/tenants');
  await until('the page lists the 3 groups', async () =>
    (await page.locator('#group-table tbody tr').count()) === 3);
  const names = await page.locator('#group-table tbody tr').evaluateAll(rs => rs.map(r => r.dataset.group));
  check(JSON.stringify(names) === '["acme","globex","initech"]', 'deepest first: ' + names);
  check(await cell('acme', 'ready') === 7 && await cell('acme', 'active') === 0, 'acme: 7 ready, 0 active');
  check((await page.textContent(`${row('globex')} td:nth-child(5)`)) === '2', 'globex: concurrency 2');
  check((await page.textContent(`${row('acme')} td:nth-child(5)`)) === 'none', 'acme: no limit');
  // each group's rate limit and bound ('–': none)
  const heads = await page.locator('#group-table thead th').evaluateAll(hs => hs.map(h => h.textContent));
  check(JSON.stringify(heads.slice(0, 8)) === '["group","ready","active","starts/s","concurrency","weight","rate","bound"]',
    'the columns: ' + heads);
  const text = async (g, stat) => page.textContent(`${row(g)} td[data-stat="${stat}"]`);
  check(await text('acme', 'rate') === '50/1s' && await text('acme', 'bound') === '500',
    'acme: 50/1s, bound 500: ' + await text('acme', 'rate') + ' ' + await text('acme', 'bound'));
  check(await text('initech', 'rate') === '3/250ms' && await text('initech', 'bound') === '\u2013',
    'initech: 3/250ms, no bound: ' + await text('initech', 'rate') + ' ' + await text('initech', 'bound'));
  check(await text('globex', 'rate') === '\u2013' && await text('globex', 'bound') === '\u2013',
    'globex: no rate, no bound');
  check(/3 groups with jobs/.test(await page.textContent('#groups h3')), 'the heading counts 3 groups');
  await shotShowsOn(page, 'groups-queue', [`${row('acme')}`, `${row('initech')}`,
    `${row('globex')} button[data-action="pause"]`]);

  // pause globex from the page: only it is paused
  await page.click(`${row('globex')} button[data-action="pause"]`);
  await until('globex shows paused', async () =>
    (await page.locator(`${row('globex')} .badge.paused`).count()) === 1 &&
    (await page.locator(`${row('globex')} button[data-action="resume"]`).count()) === 1);
  const g = await api('GET', '/v1/queues/tenants/groups');
  check(JSON.stringify(g.data.groups.filter(x => x.paused).map(x => x.name)) === '["globex"]',
    'the API: only globex paused: ' + JSON.stringify(g.data));
  const q = await api('GET', '/v1/queues/tenants');
  check(q.data.stats.paused === false, 'the queue itself is not paused');
  check((await page.locator('#paused').count()) === 0, 'no queue paused badge');
  await page.screenshot({ path: `${ART}/groups-paused.png`, fullPage: true });
  await page.click(`${row('globex')} button[data-action="resume"]`);
  await until('globex resumed', async () =>
    (await page.locator(`${row('globex')} .badge.paused`).count()) === 0 &&
    (await page.locator(`${row('globex')} button[data-action="pause"]`).count()) === 1);
  check((await api('GET', '/v1/queues/tenants/groups/globex')).data.paused === false, 'the API: globex resumed');

  // the table follows the queue: initech grows past acme (the CLI enqueues
  // them: POST .../jobs takes no group)
  const { execSync } = await import('node:child_process');
  for (let i = 0; i < 9; i++) execSync(`${process.env.RJQ} enqueue tenants more-${i} --group initech`);
  await until('initech, 10 ready, first', async () =>
    (await page.locator('#group-table tbody tr').first().getAttribute('data-group')) === 'initech' &&
    await cell('initech', 'ready') === 10);

  // a group whose jobs start (runs: its worker, one job of busy at a time):
  // its starts/s, from two readings of its started counter. (20 jobs of
  // 1 s: the group has jobs for 20 s after the first start; 60 of 150 ms
  // were all run on a loaded machine under ASan before the page had read
  // the counter twice, the group gone from the table: CI's "busy's
  // starts/s above 0")
  for (let i = 0; i < 20; i++) execSync(`${process.env.RJQ} enqueue runs sleep:1000:${i} --group busy`);
  await page.goto(BASE + '/#/q/runs');
  await until('busy\'s starts/s above 0', async () =>
    (await page.locator(row('busy')).count()) === 1 && await cell('busy', 'starts') > 0);

  // a sharded queue (2 shards, its groups on both: s1 and s3 on sharded~0-0,
  // s2 and s4 on sharded~1-0): one table of its shards' groups merged, and a
  // group paused from the page on its own shard
  await page.goto(BASE + '/#/q/sharded');
  await until('sharded\'s 4 groups', async () =>
    (await page.locator('#group-table tbody tr').count()) === 4);
  const snames = await page.locator('#group-table tbody tr').evaluateAll(rs => rs.map(r => r.dataset.group));
  check(JSON.stringify(snames) === '["s1","s2","s3","s4"]', 'sharded: merged, deepest first: ' + snames);
  check(await cell('s1', 'ready') === 4 && await cell('s4', 'ready') === 1, 'sharded: s1 4 ready, s4 1');
  check(await text('s3', 'rate') === '2/1min' && await text('s3', 'bound') === '9' &&
    await text('s1', 'rate') === '\u2013', 'sharded: s3\'s 2/1min and bound 9, from its shard: ' +
    await text('s3', 'rate') + ' ' + await text('s3', 'bound'));
  check(/4 groups with jobs/.test(await page.textContent('#groups h3')), 'sharded: the heading counts 4 groups');
  await page.click(`${row('s2')} button[data-action="pause"]`);
  await until('s2 shows paused', async () =>
    (await page.locator(`${row('s2')} .badge.paused`).count()) === 1);
  const shard1 = await api('GET', '/v1/queues/' + encodeURIComponent('sharded~1-0') + '/groups');
  check(JSON.stringify(shard1.data.groups.map(x => [x.name, x.paused])) === '[["s2",true],["s4",false]]',
    's2 paused on its shard: ' + JSON.stringify(shard1.data));
  const shard0 = await api('GET', '/v1/queues/' + encodeURIComponent('sharded~0-0') + '/groups');
  check(JSON.stringify(shard0.data.groups.map(x => [x.name, x.paused])) === '[["s1",false],["s3",false]]',
    'the other shard\'s groups not paused: ' + JSON.stringify(shard0.data));
  await page.screenshot({ path: `${ART}/groups-sharded.png`, fullPage: true });

  // a queue without groups: no table
  await page.goto(BASE + '/#/q/plain');
  await until('plain\'s page', async () => (await page.locator('.qhead h1').textContent()).startsWith('plain'));
  await until('plain\'s stats read', async () =>
    (await page.locator('.qhead [data-stat="ready"] b').textContent()) === '1');
  check((await page.locator('#group-table').count()) === 0, 'plain has no group table');
  check(consoleErrors.length === 0, 'console errors: ' + consoleErrors.join(' | '));
} catch (e) {
  check(false, 'exception: ' + (e.stack || e));
  await page.screenshot({ path: `${ART}/groups-failure.png`, fullPage: true }).catch(() => {});
} finally {
  await browser.close();
}
finish();
