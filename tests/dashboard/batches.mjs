// The batch page and the serve API behind it: run by
// tests/dashboard_batches.sh, which made batch b1 of queue bq (members m1,
// m2 of queue mq, sealed, waiting: no worker) and started rjq serve.
// Env: BASE, CHROMIUM, ART.
import { check, until, api, openPage, shotShowsOn, finish } from './lib.mjs';

const { BASE, ART } = process.env;

const { browser, page, errors: consoleErrors } = await openPage();

try {
  // the API
  let r = await api('GET', '/v1/queues/bq/batches/b1');
  check(r.status === 200, 'GET a batch: ' + r.status);
  const b = r.data || {};
  check(b.batch === 'b1' && b.queue === 'bq' && b.state === 'pending' && b.sealed === true &&
        b.total === 2 && b.completed === 0 && b.dead === 0 && b.cancelled === 0 && b.ended_ms === null,
        'its status and counts: ' + JSON.stringify(b));
  check(JSON.stringify(b.completion) === JSON.stringify([
    { on: 'complete', id: 'batch:b1:complete', enqueued: false },
    { on: 'success', id: 'batch:b1:success', enqueued: false }]), 'its completion jobs: ' + JSON.stringify(b.completion));
  r = await api('GET', '/v1/queues/bq/batches/nope');
  check(r.status === 404, 'no such batch: 404, got ' + r.status);
  r = await api('DELETE', '/v1/queues/bq/batches/b1');
  check(r.status === 409 && /pending/.test(r.data && r.data.error), 'a pending batch is not deleted unforced: ' +
        r.status + ' ' + JSON.stringify(r.data));

  // the listing (GET /v1/queues/{q}/batches) and the queue page's list of batches
  r = await api('GET', '/v1/queues/bq/batches');
  const l = r.data || {};
  check(r.status === 200 && l.queue === 'bq' && l.batches && l.batches.length === 1 &&
        l.batches[0].batch === 'b1' && l.batches[0].state === 'pending' && l.batches[0].total === 2 &&
        l.batches[0].sealed === true && l.next === null, 'the listing: ' + r.status + ' ' + JSON.stringify(l));
  r = await api('GET', '/v1/queues/bq/batches?state=completed');
  check(r.status === 200 && r.data.batches.length === 0, 'none completed yet: ' + JSON.stringify(r.data));
  r = await api('GET', '/v1/queues/bq/batches?state=nope');
  check(r.status === 400, 'a bad state: 400, got ' + r.status);
  r = await api('GET', '/v1/queues/bq/batches?after=nope');
  check(r.status === 400, 'a bad cursor: 400, got ' + r.status);
  await page.goto(BASE + '/#/q/bq');
  await until('the queue page lists its batch, linked to its page', async () =>
    (await page.getAttribute('#batch-list tr[data-batch="b1"] a', 'href')) === '#/q/bq/batch/b1');
  check((await page.textContent('#batch-list tr[data-batch="b1"] td[data-field="finished"]')) === '0 of 2',
    'its members finished, of its total');
  check(!(await page.textContent('#batches')).includes('null') && (await page.$('#batches-more')) === null,
    'one page: no "more", nothing but the list: ' + await page.textContent('#batches'));
  check((await page.getAttribute('#batch-filter button[data-state="any"]', 'aria-pressed')) === 'true',
    'the filter shows "any" chosen');
  await shotShowsOn(page, 'batches-list', ['#batch-list tr[data-batch="b1"]', '#batch-filter']);
  await page.click('#batch-filter button[data-state="completed"]');
  await until('the completed filter lists none', async () => (await page.$('#no-batches')) !== null);
  await page.click('#batch-filter button[data-state="any"]');
  await until('the batch listed again', async () => (await page.$('#batch-list tr[data-batch="b1"]')) !== null);
  await page.click('#batch-list tr[data-batch="b1"] a');
  await until('its link opens the batch page', async () => (await page.textContent('#batchstate')) === 'pending');

  // queue pq has nothing but batches: it exists, with zeros (its page's
  // head, not "does not exist")
  r = await api('GET', '/v1/queues/pq');
  check(r.status === 200 && r.data.stats.exists === true && r.data.stats.ready === 0 &&
        r.data.stats.enqueued === 0, 'a queue with nothing but batches exists with zeros: ' + r.status + ' ' +
        JSON.stringify(r.data));
  await page.goto(BASE + '/#/q/pq');
  await until('pq\'s head shows its zeros and a pause button', async () =>
    (await page.textContent('.qhead .stat[data-stat="ready"] b')) === '0' &&
    (await page.textContent('.qhead .stat[data-stat="enqueued"] b')) === '0' &&
    (await page.$('.qhead button[data-action="pause"]')) !== null);
  check((await page.$('.qhead .bad')) === null && !(await page.textContent('.qhead')).includes('does not exist'),
    'no error in pq\'s head: ' + await page.textContent('.qhead'));

  // queue pq's 25 batches: a page of 20, "more" adds the other 5, and a
  // refresh (after an action on the page: pause) keeps all 25 shown
  const batchRowsShown = () => page.$$eval('#batch-list tbody tr', rs => rs.length);
  await until('pq lists a page of 20 batches and a "more"', async () =>
    (await batchRowsShown()) === 20 && (await page.$('#batches-more')) !== null);
  await page.click('#batches-more');
  await until('"more" adds the other 5, and no "more" after the last', async () =>
    (await batchRowsShown()) === 25 && (await page.$('#batches-more')) === null);
  await page.$eval('#batch-list', e => { e.dataset.before = 'refresh'; });
  await page.click('.qhead button[data-action="pause"]');
  await until('pq paused, and its batch list drawn again', async () =>
    (await page.$('#paused')) !== null && (await page.$('#batch-list')) !== null &&
    (await page.$('#batch-list[data-before]')) === null);
  check((await batchRowsShown()) === 25 && (await page.$('#batch-list tr[data-batch="p01"]')) !== null &&
        (await page.$('#batch-list tr[data-batch="p25"]')) !== null,
    'a refresh after "more" keeps the rows the user loaded: ' + await batchRowsShown());
  check((await api('POST', '/v1/queues/pq/resume')).status === 200, 'pq resumed');

  // a "more" still in flight when a refresh lands is kept: its reply held
  // back (page.route) until the refresh (after pause) has drawn the list
  await page.goto(BASE + '/#/');
  await page.goto(BASE + '/#/q/pq');
  await until('pq lists a page of 20 batches again', async () =>
    (await batchRowsShown()) === 20 && (await page.$('#batches-more')) !== null &&
    (await page.$('.qhead button[data-action="pause"]')) !== null);
  let release, moreAsked = false;
  const held = new Promise(res => { release = res; });
  const isMore = (u) => u.pathname === '/v1/queues/pq/batches' && u.searchParams.has('after');
  await page.route(isMore, async (route) => { moreAsked = true; await held; await route.continue(); });
  await page.click('#batches-more');
  await until('the "more" is asked (its reply held)', async () => moreAsked);
  const refreshed = page.waitForResponse(res => {
    const u = new URL(res.url());
    return u.pathname === '/v1/queues/pq/batches' && !u.searchParams.has('after');
  });
  await page.click('.qhead button[data-action="pause"]');
  const rr = await refreshed;
  check(new URL(rr.url()).searchParams.get('limit') === '40',
    'the refresh reads the page "more" asked for too (20 shown, a page of 20 more): ' + rr.url());
  await until('the refresh drawn (pq paused)', async () => (await page.$('#paused')) !== null);
  release();
  await until('all 25 batches shown, no "more": the click in flight was kept', async () =>
    (await batchRowsShown()) === 25 && (await page.$('#batches-more')) === null);
  await page.unroute(isMore);
  check((await api('POST', '/v1/queues/pq/resume')).status === 200, 'pq resumed');

  // a member's job page links to its batch
  await page.goto(BASE + '/#/q/mq/job/m1');
  await until('the member\'s page links to its batch', async () =>
    (await page.getAttribute('#batch-link', 'href')) === '#/q/bq/batch/b1');
  check((await page.textContent('#dependents li[data-batch="bq:b1"]')).includes('b1'), 'the batch among its dependents');
  await page.click('#batch-link');
  await until('the batch page shows it pending', async () => (await page.textContent('#batchstate')) === 'pending');
  check((await page.textContent('#batchinfo tr[data-field="finished"] td')) === '0 of 2', 'none finished yet');
  check((await page.textContent('#completion li[data-on="complete"]')).includes('when it ends'), 'on_complete not yet');

  // its members cancelled through the API: the page follows it to its end
  for (const m of ['m1', 'm2'])
    check((await api('POST', `/v1/queues/mq/jobs/${m}/cancel`)).status === 200, 'cancel ' + m);
  await until('the batch page shows it completed', async () => (await page.textContent('#batchstate')) === 'completed');
  check((await page.textContent('#batchinfo tr[data-field="cancelled"] td')) === '2', 'two cancelled');
  check((await page.textContent('#batchinfo tr[data-field="finished"] td')) === '2 of 2', 'both finished');
  await until('the completion jobs are links', async () =>
    (await page.getAttribute('#completion li[data-on="success"] a', 'href')) === '#/q/bq/job/batch%3Ab1%3Asuccess');
  check(await page.$eval('#batch-bar span[data-seg="cancelled"]', e => e.getBoundingClientRect().width > 100),
    'the bar shows the cancelled members');
  await shotShowsOn(page, 'batches-batch', ['#batchstate', '#batchinfo', '#completion li[data-on="complete"] a',
    '#batch-bar']);

  r = await api('GET', '/v1/queues/bq/batches?state=completed');
  check(r.status === 200 && r.data.batches.length === 1 && r.data.batches[0].batch === 'b1' &&
        r.data.batches[0].cancelled === 2, 'listed completed once it ended: ' + JSON.stringify(r.data));

  // the completion job's page links back (its header rjq.batch)
  await page.click('#completion li[data-on="complete"] a');
  await until('the completion job\'s page links to its batch', async () =>
    (await page.getAttribute('#batch-link', 'href')) === '#/q/bq/batch/b1');

  r = await api('DELETE', '/v1/queues/bq/batches/b1');
  check(r.status === 200 && r.data && r.data.deleted === true, 'an ended batch deleted: ' + r.status);
  check((await api('GET', '/v1/queues/bq/batches/b1')).status === 404, 'gone once deleted');
  check(consoleErrors.length === 0, 'console errors: ' + consoleErrors.join(' | '));
} catch (e) {
  check(false, 'exception: ' + (e.stack || e));
  await page.screenshot({ path: `${ART}/batches-failure.png`, fullPage: true }).catch(() => {});
} finally {
  await browser.close();
}
finish();
