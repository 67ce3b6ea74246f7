// The dashboard's search in a real browser (Debian's chromium, driven by
// playwright-core): run by tests/dashboard_search.sh, which starts rjq
// serve over queue "sq": 5000 jobs (500 hold "needle") and job inv-42.
// Env: BASE, CHROMIUM, ART, REDIS_PID (the private redis-server: stopped
// (SIGSTOP) while the test looks at a running search and cancels it, so
// the search cannot end first; its status and cancel need no Redis).
import { check, until as untilEvery, openPage, shotShowsOn, finish } from './lib.mjs';

const { BASE, CHROMIUM, ART, REDIS_PID } = process.env;
let redisStopped = false;

const { browser, page, errors: consoleErrors } = await openPage({ consoleError: t => !/404/.test(t) });
const shotShows = (name, selectors) => shotShowsOn(page, name, selectors);
// (every 50 ms: the running search is caught between two of its steps)
const until = (what, fn, ms = 30000) => untilEvery(what, fn, ms, 50);
const status = () => page.getAttribute('#search-status', 'data-state');
const matches = () => page.locator('#search-matches tbody tr').count();

try {
  // ---- by id: the header's box, on the queue's page ----
  await page.goto(BASE + '/#/q/sq');
  await until('the queue page is up', async () => (await page.locator('#search-link').count()) === 1);
  await page.fill('#find-id', 'inv-42');
  await page.press('#find-id', 'Enter');
  await until('the box lands on the job page', async () =>
    (await page.evaluate(() => location.hash)) === '#/q/sq/job/inv-42' &&
    (await page.textContent('#jobstate')) === 'ready');
  await page.fill('#find-id', 'no-such-job');
  await page.press('#find-id', 'Enter');
  await until('a missing id says so', async () => (await page.textContent('#find-msg')) === 'no job no-such-job in sq');
  check((await page.evaluate(() => location.hash)) === '#/q/sq/job/inv-42', 'a missing id stays on the page');
  await shotShows('search-missing-id', ['#find-id', '#find-msg']);
  // from the overview: every queue is looked in
  await page.goto(BASE + '/#/');
  await until('the overview lists sq', async () => (await page.locator('text=sq').count()) > 0);
  await page.fill('#find-id', 'inv-42');
  await page.press('#find-id', 'Enter');
  await until('from the overview too', async () => (await page.evaluate(() => location.hash)) === '#/q/sq/job/inv-42');

  // ---- payload search: progress and matches while it runs, then cancel ----
  await page.goto(BASE + '/#/q/sq');
  await page.click('#search-link');
  await until('the search page', async () => (await page.locator('#search-text').count()) === 1);
  await page.fill('#search-text', 'needle');
  await page.fill('#search-count', '1'); // one payload a step: a search of 5001 steps
  await page.click('#search-start');
  await until('progress and matches while it runs', async () =>
    (await status()) === 'running' && (await matches()) >= 3 &&
    (await page.evaluate(() => document.getElementById('search-progress').value)) > 0);
  process.kill(Number(REDIS_PID), 'SIGSTOP'); // the search stays where it is
  redisStopped = true;
  const shown = await matches();
  await until('the page has polled the status since', async () =>
    (await page.evaluate(() => document.getElementById('search-progress').value)) > 0 && (await matches()) >= shown);
  check(/^running · [\d,]+ of 5,001 jobs read \(\d+%\) · \d+ match/.test(await page.textContent('#search-status')),
    'status text: ' + await page.textContent('#search-status'));
  check(await page.isEnabled('#search-cancel'), 'cancel enabled while it runs');
  await shotShows('search-running', ['#search-progress', '#search-status', '#search-cancel',
    '#search-matches tbody tr a']);
  await page.click('#search-cancel');
  await until('cancelled', async () => (await status()) === 'cancelled');
  check(!(await page.isEnabled('#search-cancel')), 'cancel disabled once cancelled');
  process.kill(Number(REDIS_PID), 'SIGCONT');
  redisStopped = false;
  const hash = await page.evaluate(() => location.hash);
  check(/^#\/q\/sq\/search\/\d+$/.test(hash), 'the page names its search: ' + hash);
  const sid = hash.split('/').pop();
  const d = await (await fetch(`${BASE}/v1/queues/sq/search/${sid}`)).json();
  check(d.state === 'cancelled' && d.scanned < 5001, 'the server says cancelled: ' + JSON.stringify(d).slice(0, 200));
  await shotShows('search-cancelled', ['#search-status', '#search-matches tbody tr']);

  // ---- a whole search: every match listed, each a link to its job ----
  await page.fill('#search-count', '100');
  await page.click('#search-start');
  await until('done with 500 matches', async () => (await status()) === 'done' && (await matches()) === 500, 90000);
  check(/^done · 5,001 of 5,001 jobs read \(100%\) · 500 matches/.test(await page.textContent('#search-status')),
    'done status: ' + await page.textContent('#search-status'));
  check((await page.locator('#search-matches a[href="#/q/sq/job/1"]').count()) === 1, 'job 1 (needle-0) is listed');
  await shotShows('search-done', ['#search-progress', '#search-status', '#search-matches tbody tr a']);
  await page.click('#search-matches a[href="#/q/sq/job/1"]');
  await until('a match opens its job', async () => (await page.textContent('#jobstate')) === 'ready' &&
    (await page.locator('pre[data-kind="json"]').first().textContent()).includes('needle-0@'));
  check(consoleErrors.length === 0, 'console errors: ' + consoleErrors.join(' | '));
} catch (e) {
  check(false, 'exception: ' + (e.stack || e));
  await page.screenshot({ path: `${ART}/search-failure.png`, fullPage: true }).catch(() => {});
} finally {
  if (redisStopped) process.kill(Number(REDIS_PID), 'SIGCONT');
  await browser.close();
}
finish();
