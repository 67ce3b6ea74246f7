// The dashboard's search in a real browser (Debian's chromium, driven by
// playwright-core): run by tests/dashboard_search.sh, which starts rjq
// serve over queue "sq": 5000 jobs (500 hold "needle") and job inv-42.
// Env: BASE, CHROMIUM, ART, REDIS_PID and REDIS_PORT (the private
// redis-server). The running search is looked at while Redis is held
// (SIGSTOP: its status and cancel need no Redis): first before its first
// step is answered, then each time Redis has run a few more of its steps
// (a MONITOR tap counts them as Redis runs them and stops Redis at once),
// until matches are shown; so the search, 5001 one-payload steps, cannot
// end before it is looked at, however fast the machine.
import { check, until as untilEvery, openPage, shotShowsOn, finish } from './lib.mjs';
import { connect } from 'node:net';

const { BASE, CHROMIUM, ART, REDIS_PID, REDIS_PORT } = process.env;
let redisStopped = false;
const hold = () => { process.kill(Number(REDIS_PID), 'SIGSTOP'); redisStopped = true; };
const release = () => { process.kill(Number(REDIS_PID), 'SIGCONT'); redisStopped = false; };

// A MONITOR tap: steps counts the HSCANs Redis has run (one per search
// step: search.lua); holdAfter(n) releases Redis and holds it again (in the
// tap's data handler, at once) when it has run n more.
let steps = 0, stopAt = Infinity, onStop = null, tail = '';
const tap = connect(Number(REDIS_PORT), '127.0.0.1');
await new Promise((ok, fail) => { tap.once('connect', ok); tap.once('error', fail); });
tap.on('data', b => {
  const text = tail + b.toString('latin1');
  steps += text.split('"HSCAN"').length - 1;
  tail = text.slice(-6); // (a word cut between two reads is counted with the next)
  if (steps >= stopAt && !redisStopped) {
    hold();
    stopAt = Infinity;
    onStop();
  }
});
tap.write('MONITOR\r\n');
await new Promise(ok => tap.once('data', ok)); // (+OK: the tap is on)
const holdAfter = n => new Promise(ok => { stopAt = steps + n; onStop = ok; release(); });

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
  hold(); // its first step stays unanswered
  await page.click('#search-start');
  await until('running while its first step is out', async () =>
    (await status()) === 'running' && /^running · 0 of /.test(await page.textContent('#search-status')));
  check(await page.isEnabled('#search-cancel'), 'cancel enabled while it runs');
  check(!(await page.isEnabled('#search-start')), 'start disabled while it runs');
  check((await matches()) === 0, 'no match before a step');
  const sid = (await page.evaluate(() => location.hash)).split('/').pop();
  // released for a few steps at a time until the server has matches
  let d = null;
  for (let i = 0; i < 50; i++) {
    await holdAfter(20);
    d = await (await fetch(`${BASE}/v1/queues/sq/search/${sid}`)).json();
    if (d.found >= 3) break;
  }
  check(d.state === 'running' && d.found >= 3 && d.scanned < 5001,
    'held with matches, running: ' + JSON.stringify(d).slice(0, 200));
  await until('progress and matches while it runs', async () =>
    (await status()) === 'running' && (await matches()) >= 3 &&
    (await page.evaluate(() => document.getElementById('search-progress').value)) > 0);
  check(/^running · [\d,]+ of 5,001 jobs read \(\d+%\) · \d+ match/.test(await page.textContent('#search-status')),
    'status text: ' + await page.textContent('#search-status'));
  check(await page.isEnabled('#search-cancel'), 'cancel enabled while it runs');
  await shotShows('search-running', ['#search-progress', '#search-status', '#search-cancel',
    '#search-matches tbody tr a']);
  await page.click('#search-cancel');
  await until('cancelled', async () => (await status()) === 'cancelled');
  check(!(await page.isEnabled('#search-cancel')), 'cancel disabled once cancelled');
  release();
  const hash = await page.evaluate(() => location.hash);
  check(hash === `#/q/sq/search/${sid}` && /^\d+$/.test(sid), 'the page names its search: ' + hash);
  d = await (await fetch(`${BASE}/v1/queues/sq/search/${sid}`)).json();
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
  if (redisStopped) release();
  tap.destroy();
  await browser.close();
}
finish();
