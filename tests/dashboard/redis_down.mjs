// The dashboard with Redis gone and back (tests/dashboard_redis_down.sh):
// Redis is stopped by its pid while the overview is open, then a new
// redis-server is started on the same port (its pid file in DIR). While
// Redis is down the health line is red ("Redis unreachable since <time>")
// and shows none of the figures read before (nor does /v1/server), the
// queue table is hidden; the restarted Redis has every counter back at 0,
// which no rate may read as a negative one (a reset, as Prometheus reads it).
// The queue page, open meanwhile, hides its job rows, charts, settings and
// processes read before (not shown as live: a red note says why) and reads
// them again once Redis is back.
// Env: BASE, REDIS_PID, REDIS_PORT, DIR, CHROMIUM, ART.
import { check, until, openPage, shotShowsOn, finish, api } from './lib.mjs';
import { execFileSync } from 'node:child_process';

const { BASE, REDIS_PID, REDIS_PORT, DIR, CHROMIUM, ART } = process.env;
function alive(pid) { try { process.kill(pid, 0); return true; } catch (e) { return false; } }

const { browser, page, errors: pageErrors } = await openPage();
const shotShows = (name, selectors) => shotShowsOn(page, name, selectors);

try {
  for (const p of ['x', 'y', 'z'])
    check((await api('POST', '/v1/queues/before/jobs', p)).status === 201, 'a job enqueued');
  await page.goto(BASE + '/');
  await until('the overview is live and lists the queue', async () =>
    (await page.textContent('#conn')) === 'live' && (await page.locator('tr[data-queue="before"]').count()) === 1);
  const FIGURES = /Redis \d+\.\d+\.\d+ at 127\.0\.0\.1:\d+ · master · \d+ clients · [\d.]+ MB used/;
  await until('the health line shows Redis figures (the server reads them every 2 s)', async () => {
    if (FIGURES.test(await page.textContent('#redis-health'))) return true;
    await page.reload();
    return false;
  });
  await until('the overview counts the 3 jobs', async () =>
    (await page.textContent('tr[data-queue="before"] td:nth-child(2)')) === '3');

  // ---- Redis stopped (by its pid): red ----
  // a second page on the queue's page: its figures, until Redis goes
  const qpage = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  qpage.on('pageerror', e => pageErrors.push(String(e)));
  await qpage.goto(BASE + '/#/q/before/ready');
  await until('the queue page shows its figures', async () =>
    (await qpage.textContent('#conn')) === 'live' &&
    (await qpage.textContent('.qhead [data-stat="ready"] b')) === '3');
  await until('the queue page lists its 3 ready jobs and draws its charts', async () =>
    (await qpage.locator('.jobs tr[data-id][data-state="ready"]').count()) === 3 &&
    (await qpage.locator('#chart-throughput').count()) === 1 &&
    (await qpage.locator('#settings table').count()) === 1);
  check(await qpage.locator('#queue-stale').isHidden(), 'no stale note while Redis is up');
  const pid = Number(REDIS_PID);
  const stoppedAt = Date.now();
  process.kill(pid, 'SIGTERM');
  await until('redis-server exited', async () => !alive(pid));
  await until('the badge says redis down, in red', async () =>
    (await page.textContent('#conn')) === 'redis down' &&
    (await page.getAttribute('#conn', 'class')).includes('bad'));
  await until('the overview says Redis is unreachable', async () =>
    (await page.locator('#redis-down:not([hidden])').count()) === 1 &&
    (await page.textContent('#redis-down')).includes('Redis is unreachable since '));
  // the health line: red, the time Redis went, no figure of before
  const DOWN = /^Redis unreachable since \d\d:\d\d:\d\d$/;
  const downLine = async () => {
    const t = await page.textContent('#redis-health');
    return DOWN.test(t) && !/MB used|clients/.test(t) &&
      (await page.locator('#redis-health #redis-unreachable.bad').count()) === 1 &&
      (await page.locator('#redis-health [data-node]').count()) === 0;
  };
  await until('the health line says Redis unreachable since <time>, no stale figures', downLine);
  await until('the queue table and its stale counts are hidden', async () =>
    (await page.locator('#queues').isHidden()));
  await until('the queue page says Redis is unreachable since <time>, not its figures of before', async () =>
    /^Redis unreachable since \d\d:\d\d:\d\d: /.test(await qpage.textContent('#queue-redis-down')) &&
    (await qpage.locator('.qhead [data-stat]').count()) === 0);
  await until('the queue page hides its job rows, charts, settings and processes, says why', async () =>
    (await qpage.locator('#queue-page.stale[data-redis="down"]').count()) === 1 &&
    /^Redis unreachable since \d\d:\d\d:\d\d: the job lists, charts, settings and processes read before are hidden/
      .test(await qpage.textContent('#queue-stale')) &&
    (await qpage.locator('.jobs tr[data-id]').first().isHidden()) &&
    (await qpage.locator('#chart-throughput').isHidden()) &&
    (await qpage.locator('#history').isHidden()) &&
    (await qpage.locator('#settings').isHidden()) &&
    (await qpage.locator('#queue-processes').isHidden()));
  await shotShowsOn(qpage, 'redis-down-queue', ['#queue-stale', '#queue-redis-down']);
  // a queue page opened while Redis is down: the same, at once
  await qpage.reload();
  await until('a queue page opened while Redis is down hides the same, says why', async () =>
    (await qpage.locator('#queue-page.stale[data-redis="down"]').count()) === 1 &&
    (await qpage.locator('#queue-stale').isVisible()) &&
    (await qpage.locator('.jobs table.rows').isHidden()) &&
    (await qpage.locator('#history').isHidden()));
  const hz = await fetch(BASE + '/healthz');
  const hzBody = await hz.json();
  check(hz.status === 503 && hzBody.down_since_ms >= stoppedAt - 1000 && hzBody.down_since_ms <= Date.now(),
    '/healthz: 503 and since when: ' + JSON.stringify(hzBody));
  const sv = (await api('GET', '/v1/server')).data;
  check(sv.redis === false && sv.redis_nodes === null && sv.redis_memory === null &&
        sv.redis_down_since_ms === hzBody.down_since_ms,
    '/v1/server while down: no figures of before, since when: ' + JSON.stringify(sv));
  // a page opened while Redis is down: the same, at once
  await page.reload();
  await until('a reload while down: red health line, no figures', downLine);
  const red = await page.evaluate(() => getComputedStyle(document.getElementById('conn')).backgroundColor);
  const [r, g, b] = red.match(/\d+/g).map(Number);
  check(r > 150 && g < 100 && b < 100, 'the badge is red: ' + red);
  // its words readable on it (regression: they were drawn in the same red)
  const ink = await page.evaluate(() => getComputedStyle(document.getElementById('conn')).color);
  const [ir, ig, ib] = ink.match(/\d+/g).map(Number);
  check(Math.abs(ir - r) + Math.abs(ig - g) + Math.abs(ib - b) > 200, `the badge's text (${ink}) is readable on ${red}`);
  await shotShows('redis-down', ['#conn.bad', '#redis-down', '#redis-unreachable']);
  // every stats event from here on (the rates of the queue whose counters
  // the new Redis resets)
  await page.evaluate(() => {
    window.seenStats = [];
    const es = new EventSource('/v1/events?jobs=0');
    es.addEventListener('stats', m => window.seenStats.push(JSON.parse(m.data)));
  });

  // ---- Redis back on the same port: recovered ----
  execFileSync('redis-server', ['--port', REDIS_PORT, '--bind', '127.0.0.1', '--dir', DIR, '--save', '',
    '--appendonly', 'no', '--daemonize', 'yes', '--pidfile', `${DIR}/redis2.pid`, '--logfile', `${DIR}/redis2.log`]);
  await until('the badge is live again', async () => (await page.textContent('#conn')) === 'live', 60000);
  await until('the warning is gone', async () => (await page.locator('#redis-down:not([hidden])').count()) === 0);
  await until('the queue page reads the queue again: the new Redis has nothing of it', async () =>
    (await qpage.locator('#queue-redis-down').count()) === 0 &&
    (await qpage.textContent('.qhead')).includes('does not exist'));
  await until('the queue page shows its list, charts and settings again, read from the new Redis', async () =>
    (await qpage.locator('#queue-page:not(.stale)[data-redis="up"]').count()) === 1 &&
    (await qpage.locator('#queue-stale').isHidden()) &&
    (await qpage.locator('.jobs tr[data-id]').count()) === 0 && /* (the new Redis has none of the 3) */
    (await qpage.locator('.jobs table.rows').isVisible()) &&
    (await qpage.locator('#chart-throughput').isVisible()) &&
    (await qpage.getAttribute('#history', 'data-loaded')) !== null &&
    (await qpage.locator('#settings').isVisible()));
  await shotShowsOn(qpage, 'redis-down-queue-recovered', ['#chart-throughput', '.jobs table.rows', '#settings']);
  await qpage.close();
  await until('the health line shows the new Redis\' figures', async () =>
    FIGURES.test(await page.textContent('#redis-health')));
  await until('the queue enqueued to before is read from the new Redis: its counters reset', async () =>
    (await page.evaluate(() => window.seenStats.some(q => q.name === 'before' && q.stats.enqueued === 0))));
  const seen = await page.evaluate(() => window.seenStats);
  const negative = seen.filter(q => q.rates.in < 0 || q.rates.done < 0 || q.rates.fail < 0);
  check(negative.length === 0, 'no negative rate after the restart: ' + JSON.stringify(negative.map(q => [q.name, q.rates])));
  check(await page.evaluate(() => [...document.querySelectorAll('#queues td.num')].every(td => !td.textContent.startsWith('-'))),
    'no negative figure in the overview');
  await until('a job is enqueued after the restart', async () =>
    (await api('POST', '/v1/queues/after/jobs', 'y')).status === 201);
  await until('the queue enqueued to after the restart is listed', async () =>
    (await page.locator('tr[data-queue="after"]').count()) === 1);
  await shotShows('redis-down-recovered', ['#conn.live', 'tr[data-queue="after"]']);
  check(pageErrors.length === 0, 'page errors: ' + pageErrors.join(' | '));
} catch (e) {
  check(false, 'exception: ' + (e.stack || e));
  await page.screenshot({ path: `${ART}/redis-down-failure.png`, fullPage: true }).catch(() => {});
} finally {
  await browser.close();
}
finish();
