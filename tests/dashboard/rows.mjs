// The dashboard's job rows, job page and bulk actions in a real browser
// (Debian's chromium, driven by playwright-core): run by
// tests/dashboard_rows.sh, which starts rjq serve and a worker on "rq".
// Env: BASE, WPID (the worker's pid), HOST (its host name), CHROMIUM, ART.
import { check, until, openPage, shotShowsOn, finish, api } from './lib.mjs';

const { BASE, WPID, HOST, CHROMIUM, ART } = process.env;

const { browser, page, errors: consoleErrors } = await openPage({ consoleError: () => true });
const shotShows = (name, selectors) => shotShowsOn(page, name, selectors);
const cell = (id, cls) => page.locator(`tr[data-id="${id}"] td.${cls}`).textContent();

try {
  // jobs in several states: completed, dead, active (sleeps), delayed
  check((await api('POST', '/v1/queues/rq/jobs?id=done-1&wait=10000', '{"kind":"email","to":"a@b.c"}')).status === 200,
    'done-1 completed');
  check((await api('POST', '/v1/queues/rq/jobs?id=dead-1&wait=10000&attempts=1', 'fail-on-purpose')).status === 502,
    'dead-1 died');
  await api('POST', '/v1/queues/rq/jobs?id=busy-1', 'sleep:600000:x');
  for (const i of [1, 2, 3, 4])
    await api('POST', `/v1/queues/rq/jobs?id=later-${i}&delay=600000`, `{"type":"resize","n":${i}}`);
  await until('busy-1 is active', async () =>
    (await api('GET', '/v1/queues/rq/jobs?state=active&rows=0')).data.ids.includes('busy-1'));

  // ---- the completed list: kind, attempts, times, worker ----
  await page.goto(BASE + '/#/q/rq/completed');
  await until('the completed list shows done-1 with its kind', async () =>
    (await cell('done-1', 'what')) === 'email');
  check((await cell('done-1', 'attempts')) === '1/' + (await api('GET', '/v1/queues/rq/jobs/done-1')).data.max_attempts,
    'attempts of done-1: ' + await cell('done-1', 'attempts'));
  for (const c of ['enqueued', 'started', 'ended'])
    check(/ago$/.test(await cell('done-1', c)) &&
          (await page.locator(`tr[data-id="done-1"] td.${c} time`).count()) === 1, `done-1 shows its ${c} time`);
  check((await cell('done-1', 'worker')) === `${HOST} pid ${WPID}`, 'done-1 worker: ' + await cell('done-1', 'worker'));
  await shotShows('rows-completed', ['table.rows thead', 'tr[data-id="done-1"] td.what',
    'tr[data-id="done-1"] td.attempts', 'tr[data-id="done-1"] td.ended time', 'tr[data-id="done-1"] td.worker']);

  // ---- dead: the error; active: started, not finished, its worker ----
  await page.goto(BASE + '/#/q/rq/dead');
  await until('the dead list shows the error', async () =>
    (await cell('dead-1', 'error')).startsWith('refused: fail-on-purpose'));
  check((await cell('dead-1', 'what')) === 'fail-on-purpose', 'dead-1 preview: ' + await cell('dead-1', 'what'));
  await shotShows('rows-dead', ['tr[data-id="dead-1"] td.error', 'tr[data-id="dead-1"] button[data-action="replay"]']);
  await page.goto(BASE + '/#/q/rq/active');
  await until('the active list shows busy-1 running on the worker', async () =>
    (await cell('busy-1', 'worker')) === `${HOST} pid ${WPID}` && /ago$/.test(await cell('busy-1', 'started')) &&
    (await cell('busy-1', 'ended')) === '–');
  // the queue page's processes: the worker, and the jobs it runs (pushed by the stream)
  const procRow = `#queue-processes tr[data-process][data-queue="rq"]`;
  await until('the queue page lists the worker process running busy-1', async () =>
    (await page.locator(procRow).count()) === 1 &&
    (await page.textContent(`${procRow} td`)).startsWith(`${HOST} pid ${WPID}`) &&
    (await page.getAttribute(`${procRow} a[data-job="busy-1"]`, 'href')) === '#/q/rq/job/busy-1');
  await api('POST', '/v1/queues/rq/jobs?id=busy-2', 'sleep:600000:y'); /* (runs as long as the test) */
  await until('busy-2 shows in the process\'s running jobs without a reload', async () =>
    (await page.locator(`${procRow} a[data-job="busy-2"]`).count()) === 1 &&
    (await page.locator(`${procRow} a[data-job="busy-1"]`).count()) === 1);
  await shotShows('rows-processes', [`${procRow} a[data-job="busy-1"]`, `${procRow} a[data-job="busy-2"]`]);

  // ---- the job page: times, attempts, worker, payload, result ----
  await page.goto(BASE + '/#/q/rq/job/done-1');
  await until('the job page shows its times and worker', async () =>
    (await page.textContent('#jobstate')) === 'completed' &&
    (await page.locator('#jobinfo tr[data-field="ended"] time').count()) === 1);
  for (const f of ['enqueued', 'started', 'ended'])
    check((await page.locator(`#jobinfo tr[data-field="${f}"] time`).getAttribute('datetime')).endsWith('Z'),
      `job page: ${f} time`);
  check((await page.textContent('#jobinfo tr[data-field="worker"] td')) === `${HOST} pid ${WPID}`, 'job page: worker');
  check((await page.textContent('#jobinfo tr[data-field="attempts"] td')).startsWith('1 of '), 'job page: attempts');
  check(/ms|s$/.test(await page.textContent('#jobinfo tr[data-field="run"] td')), 'job page: run time');
  check((await page.locator('pre[data-kind="json"]').first().textContent()).includes('"kind": "email"'), 'job page: payload');
  check((await page.locator('#attempts tbody tr').count()) === 1 &&
        (await page.locator('#attempts tr[data-outcome="completed"]').count()) === 1, 'job page: one completed attempt');
  await shotShows('rows-job', ['#attempts tr[data-outcome="completed"]', '#jobstate', '#jobinfo tr[data-field="enqueued"] time',
    '#jobinfo tr[data-field="started"] time', '#jobinfo tr[data-field="ended"] time',
    '#jobinfo tr[data-field="worker"]', 'pre[data-kind="json"]']);

  // the dead job's page: its one failed attempt, with its worker
  await page.goto(BASE + '/#/q/rq/job/dead-1');
  await until('the dead job page shows its failed attempt', async () =>
    (await page.locator('#attempts tr[data-outcome="failed"]').count()) === 1);
  check((await page.locator('#attempts tr[data-outcome="failed"] td').nth(4).textContent()) === `${HOST} pid ${WPID}`,
    'the failed attempt names its worker');

  // ---- bulk: select 3 delayed jobs, cancel them ----
  await page.goto(BASE + '/#/q/rq/delayed');
  await until('the delayed list shows 4 jobs with their kind', async () =>
    (await page.locator('tr[data-id^="later-"] td.what').allTextContents()).filter(t => t === 'resize').length === 4);
  for (const i of [1, 2, 3]) await page.check(`tr[data-id="later-${i}"] input.pick`);
  await until('3 selected', async () => (await page.textContent('#bulk-count')) === '3 selected');
  await shotShows('rows-bulk', ['#bulk-count', '#bulk button[data-action="cancel selected"]',
    'tr[data-id="later-1"] input.pick:checked', 'tr[data-id="later-3"] input.pick:checked']);
  await page.click('#bulk button[data-action="cancel selected"]');
  await until('a readable toast: 3 jobs cancelled', async () =>
    (await page.locator('.toast').allTextContents()).includes('3 jobs cancelled'));
  const cancelled = (await api('GET', '/v1/queues/rq/jobs?state=cancelled&rows=0')).data.ids.sort();
  check(JSON.stringify(cancelled) === '["later-1","later-2","later-3"]', 'cancelled: ' + cancelled);
  await until('the list keeps later-4 only', async () =>
    (await page.locator('tr[data-id^="later-"]').count()) === 1 &&
    (await page.locator('tr[data-id="later-4"]').count()) === 1);

  // ---- run now: a delayed row's button, two selected at once, the job page's ----
  for (const i of [5, 6, 7])
    await api('POST', `/v1/queues/rq/jobs?id=later-${i}&delay=600000`, `{"type":"resize","n":${i}}`);
  const notDelayed = async (id) => (await api('GET', `/v1/queues/rq/jobs/${id}`)).data.state !== 'delayed';
  await until('the delayed list shows later-4..7', async () =>
    (await page.locator('tr[data-id^="later-"]').count()) === 4);
  await shotShows('rows-run-now', ['tr[data-id="later-4"] button[data-action="run now"]']);
  await page.click('tr[data-id="later-4"] button[data-action="run now"]');
  await until('a toast: made ready later-4', async () =>
    (await page.locator('.toast').allTextContents()).includes('made ready later-4'));
  check(await notDelayed('later-4'), 'later-4 left the delayed set');
  await until('the list drops later-4', async () => (await page.locator('tr[data-id="later-4"]').count()) === 0);
  for (const i of [5, 6]) await page.check(`tr[data-id="later-${i}"] input.pick`);
  await until('2 selected', async () => (await page.textContent('#bulk-count')) === '2 selected');
  const runNowPosts = [];
  const onRequest = r => { if (r.method() === 'POST' && /run-now/.test(r.url())) runNowPosts.push([r.url(), r.postData()]); };
  page.on('request', onRequest);
  await page.click('#bulk button[data-action="run now selected"]');
  await until('a toast: 2 jobs made ready', async () =>
    (await page.locator('.toast').allTextContents()).includes('2 jobs made ready'));
  page.off('request', onRequest);
  check(await notDelayed('later-5') && await notDelayed('later-6'), 'later-5 and later-6 left the delayed set');
  check(runNowPosts.length === 1 && runNowPosts[0][0] === BASE + '/v1/queues/rq/run-now' &&
        JSON.stringify(JSON.parse(runNowPosts[0][1]).ids.sort()) === '["later-5","later-6"]',
    'the bulk run now is one request with the ids: ' + JSON.stringify(runNowPosts));
  // the bulk endpoint answers for each id, in the order given
  await api('POST', '/v1/queues/rq/jobs?id=later-8&delay=600000', 'x');
  const bulk = await api('POST', '/v1/queues/rq/run-now', JSON.stringify({ ids: ['later-8', 'later-5', 'no-such-job'] }));
  check(bulk.status === 200 && bulk.data.ran === 1 && JSON.stringify(bulk.data.results) ===
    '[{"id":"later-8","result":"ran"},{"id":"later-5","result":"not delayed"},{"id":"no-such-job","result":"not found"}]',
    'POST /v1/queues/rq/run-now: ran, not delayed, not found: ' + JSON.stringify(bulk));
  check(await notDelayed('later-8'), 'later-8 left the delayed set');
  for (const body of ['', 'x', '{}', '{"ids":[]}', '{"ids":[1]}', '{"ids":[""]}',
                      JSON.stringify({ ids: [...Array(101).keys()].map(i => 'j' + i) })])
    check((await api('POST', '/v1/queues/rq/run-now', body)).status === 400, 'a bad bulk body is a 400: ' + body.slice(0, 20));
  check((await api('GET', '/v1/queues/rq/run-now')).status === 405, 'GET run-now: 405');
  await page.goto(BASE + '/#/q/rq/job/later-7');
  await until('the job page of a delayed job has run now', async () =>
    (await page.textContent('#jobstate')) === 'delayed' &&
    (await page.locator('.actions button[data-action="run now"]').count()) === 1);
  await page.click('.actions button[data-action="run now"]');
  await until('the job page shows it left delayed', async () => (await page.textContent('#jobstate')) !== 'delayed');
  check(await notDelayed('later-7'), 'later-7 left the delayed set');

  // ---- paging by cursor: 55 delayed jobs, pages of 50 ----
  await Promise.all([...Array(55).keys()].map(i =>
    api('POST', `/v1/queues/rq/jobs?id=pg-${String(i).padStart(2, '0')}&delay=600000`, 'p')));
  await page.goto(BASE + '/#/q/rq/delayed');
  await until('the first page shows 50 delayed jobs', async () =>
    (await page.locator('tr[data-id^="pg-"]').count()) === 50);
  const first = await page.locator('tr[data-id^="pg-"]').evaluateAll(rs => rs.map(r => r.dataset.id));
  await page.click('#page-more');
  await until('the next page shows the other 5', async () =>
    (await page.locator('tr[data-id^="pg-"]').count()) === 5 && (await page.locator('#page-back').count()) === 1);
  const second = await page.locator('tr[data-id^="pg-"]').evaluateAll(rs => rs.map(r => r.dataset.id));
  check(new Set([...first, ...second]).size === 55, `pages cover 55 jobs once: ${first.length} + ${second.length}`);
  await page.click('#page-first');
  await until('back on the first page', async () => (await page.locator('tr[data-id^="pg-"]').count()) === 50);

  // a refresh of the first page still in flight when "more" is clicked:
  // its reply (held back with page.route until page 2 is drawn) is not
  // drawn over page 2 (a MutationObserver sees any first-page row come back)
  let release, heldFirst = 0;
  const held = new Promise(res => { release = res; });
  const isFirstPage = (u) => u.pathname === '/v1/queues/rq/jobs' && u.searchParams.get('state') === 'delayed' &&
    u.searchParams.get('after') === '';
  await page.route(isFirstPage, async (route) => { heldFirst++; await held; await route.continue(); });
  check((await api('POST', '/v1/queues/rq/jobs?id=pg-late&delay=900000', 'p')).status === 201, 'one more delayed job');
  await until('its event makes the page refresh the first page (held)', async () => heldFirst > 0);
  await page.click('#page-more');
  await until('page 2 drawn while the first page\'s reply is held', async () =>
    (await page.locator('#page-back').count()) === 1 && (await page.locator('tr[data-id="pg-late"]').count()) === 1 &&
    (await page.locator('tr[data-id="pg-00"]').count()) === 0);
  await page.evaluate(() => {
    window.staleFirstPage = false;
    new MutationObserver(() => {
      if (document.querySelector('tr[data-id="pg-00"]')) window.staleFirstPage = true;
    }).observe(document.body, { childList: true, subtree: true });
  });
  const firstDone = page.waitForEvent('requestfinished', rq => isFirstPage(new URL(rq.url())));
  release();
  await firstDone;
  // a later refresh (another job's event) as the point after which the held
  // reply was handled
  const later = page.waitForEvent('requestfinished', rq => {
    const u = new URL(rq.url());
    return u.pathname === '/v1/queues/rq/jobs' && u.searchParams.get('state') === 'delayed' &&
      u.searchParams.get('after') !== '';
  });
  check((await api('POST', '/v1/queues/rq/jobs?id=pg-later&delay=900000', 'p')).status === 201, 'another delayed job');
  await later;
  await until('page 2 shows the new job', async () => (await page.locator('tr[data-id="pg-later"]').count()) === 1);
  check(!(await page.evaluate(() => window.staleFirstPage)) && (await page.locator('#page-back').count()) === 1,
    'the first page\'s late reply was not drawn over page 2');
  await page.unroute(isFirstPage);

  // select all on the page, then delete the cancelled ones
  await page.goto(BASE + '/#/q/rq/cancelled');
  await until('the cancelled list shows 3 jobs', async () => (await page.locator('tr[data-id^="later-"]').count()) === 3);
  await page.check('#select-all');
  await until('select all picks the page', async () => (await page.textContent('#bulk-count')) === '3 selected');
  await page.click('#bulk button[data-action="delete selected"]');
  await until('a readable toast: 3 jobs deleted', async () =>
    (await page.locator('.toast').allTextContents()).includes('3 jobs deleted'));
  check((await api('GET', '/v1/queues/rq/jobs?state=cancelled&rows=0')).data.ids.length === 0, 'the cancelled set is empty');
  check(consoleErrors.length === 0, 'console errors: ' + consoleErrors.join(' | '));
} catch (e) {
  check(false, 'exception: ' + (e.stack || e));
  await page.screenshot({ path: `${ART}/rows-failure.png`, fullPage: true }).catch(() => {});
} finally {
  await browser.close();
}
finish();
