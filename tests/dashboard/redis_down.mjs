// The dashboard with Redis gone and back (tests/dashboard_redis_down.sh):
// Redis is stopped by its pid while the overview is open, then a new
// redis-server is started on the same port (its pid file in DIR).
// Env: BASE, REDIS_PID, REDIS_PORT, DIR, CHROMIUM, ART.
import { check, until, openPage, shotShowsOn, finish, api } from './lib.mjs';
import { execFileSync } from 'node:child_process';

const { BASE, REDIS_PID, REDIS_PORT, DIR, CHROMIUM, ART } = process.env;
function alive(pid) { try { process.kill(pid, 0); return true; } catch (e) { return false; } }

const { browser, page, errors: pageErrors } = await openPage();
const shotShows = (name, selectors) => shotShowsOn(page, name, selectors);

try {
  check((await api('POST', '/v1/queues/before/jobs', 'x')).status === 201, 'a job enqueued');
  await page.goto(BASE + '/');
  await until('the overview is live and lists the queue', async () =>
    (await page.textContent('#conn')) === 'live' && (await page.locator('tr[data-queue="before"]').count()) === 1);

  // ---- Redis stopped (by its pid): red ----
  const pid = Number(REDIS_PID);
  process.kill(pid, 'SIGTERM');
  await until('redis-server exited', async () => !alive(pid));
  await until('the badge says redis down, in red', async () =>
    (await page.textContent('#conn')) === 'redis down' &&
    (await page.getAttribute('#conn', 'class')).includes('bad'));
  await until('the overview says Redis is unreachable', async () =>
    (await page.locator('#redis-down:not([hidden])').count()) === 1 &&
    (await page.textContent('#redis-down')).includes('Redis is unreachable'));
  const red = await page.evaluate(() => getComputedStyle(document.getElementById('conn')).backgroundColor);
  const [r, g, b] = red.match(/\d+/g).map(Number);
  check(r > 150 && g < 100 && b < 100, 'the badge is red: ' + red);
  // its words readable on it (regression: they were drawn in the same red)
  const ink = await page.evaluate(() => getComputedStyle(document.getElementById('conn')).color);
  const [ir, ig, ib] = ink.match(/\d+/g).map(Number);
  check(Math.abs(ir - r) + Math.abs(ig - g) + Math.abs(ib - b) > 200, `the badge's text (${ink}) is readable on ${red}`);
  await shotShows('redis-down', ['#conn.bad', '#redis-down']);

  // ---- Redis back on the same port: recovered ----
  execFileSync('redis-server', ['--port', REDIS_PORT, '--bind', '127.0.0.1', '--dir', DIR, '--save', '',
    '--appendonly', 'no', '--daemonize', 'yes', '--pidfile', `${DIR}/redis2.pid`, '--logfile', `${DIR}/redis2.log`]);
  await until('the badge is live again', async () => (await page.textContent('#conn')) === 'live', 60000);
  await until('the warning is gone', async () => (await page.locator('#redis-down:not([hidden])').count()) === 0);
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
