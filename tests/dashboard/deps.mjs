// A job's dependencies and dependents, and the waiting jobs, on the
// dashboard: run by tests/dashboard_deps.sh, which enqueued a1 (queue da,
// delayed), b1 and b2 (db, waiting for a1; b1 for da:nosuch too, policy
// ignore), c1 (dc, waiting for b2, policy run) and started rjq serve.
// Env: BASE, CHROMIUM, ART.
import { check, until, api, openPage, shotShowsOn, finish } from './lib.mjs';

const { BASE, ART } = process.env;

const { browser, page, errors: consoleErrors } = await openPage();

try {
  let r = await api('GET', '/v1/queues/db');
  check(r.status === 200 && r.data.stats.waiting === 2, 'db\'s stats count 2 waiting: ' + JSON.stringify(r.data));

  // the queue page: its waiting count, and a tab listing its waiting jobs
  await page.goto(BASE + '/#/q/db');
  await until('the queue page shows 2 waiting', async () =>
    (await page.$('.qhead .stat[data-stat="waiting"] b')) !== null &&
    (await page.textContent('.qhead .stat[data-stat="waiting"] b')) === '2');
  await page.click('.tabs a[data-tab="waiting"]');
  await until('the waiting tab lists b1 and b2', async () =>
    (await page.locator('tr[data-id="b1"][data-state="waiting"]').count()) === 1 &&
    (await page.locator('tr[data-id="b2"][data-state="waiting"]').count()) === 1);

  // a waiting job's page: each dependency, its state now and how it counted
  await page.goto(BASE + '/#/q/db/job/b1');
  await until('b1\'s page shows it waiting', async () => (await page.textContent('#jobstate')) === 'waiting');
  const dep = async (d) => (await page.textContent(`#dependencies tr[data-dep="${d}"]`)).replace(/\s+/g, ' ');
  await until('its dependencies listed', async () => (await page.$('#dependencies tr[data-dep="da:a1"]')) !== null);
  let t = await dep('da:a1');
  check(t.includes('delayed') && t.includes('pending'), 'da:a1 delayed, pending: ' + t);
  check((await page.getAttribute('#dependencies tr[data-dep="da:a1"] a', 'href')) === '#/q/da/job/a1', 'linked to its page');
  t = await dep('da:nosuch');
  check(t.includes('missing') && t.includes('ignored'), 'da:nosuch missing, ignored (its policy): ' + t);
  check((await page.textContent('#dependents')).includes('none waiting'), 'b1 has no dependents');
  await shotShowsOn(page, 'deps-job', ['#jobstate', '#dependencies tr[data-dep="da:a1"]', '#dependencies tr[data-dep="da:nosuch"]']);

  // the dependency's page: its dependents, linked
  await page.click('#dependencies tr[data-dep="da:a1"] a');
  await until('a1\'s page lists its two dependents', async () =>
    (await page.locator('#dependents li[data-dep]').count()) === 2);
  check((await page.getAttribute('#dependents li[data-dep="db:b1"] a', 'href')) === '#/q/db/job/b1', 'b1 linked');
  check((await page.getAttribute('#dependents li[data-dep="db:b2"] a', 'href')) === '#/q/db/job/b2', 'b2 linked');
  check((await page.textContent('#dependencies')).includes('none'), 'a1 has no dependencies');

  // a waiting job cancelled from its page: it alone; its dependent (policy
  // run) is released, and reads it cancelled
  await page.goto(BASE + '/#/q/db/job/b2');
  await until('b2\'s page shows it waiting, with a cancel', async () =>
    (await page.textContent('#jobstate')) === 'waiting' && (await page.$('button[data-action="cancel"]')) !== null);
  await page.click('button[data-action="cancel"]');
  await until('b2 cancelled', async () => (await page.textContent('#jobstate')) === 'cancelled');
  await until('c1 released (policy run)', async () =>
    (await api('GET', '/v1/queues/dc/jobs/c1')).data.state === 'ready');
  await page.goto(BASE + '/#/q/dc/job/c1');
  await until('c1\'s page reads b2 cancelled', async () =>
    (await page.$('#dependencies tr[data-dep="db:b2"]')) !== null &&
    (await dep('db:b2')).includes('cancelled'));
  r = await api('GET', '/v1/queues/da/jobs/a1');
  check(r.data.state === 'delayed', 'b2\'s dependency untouched: ' + r.data.state);
  r = await api('GET', '/v1/queues/db/jobs/b1');
  check(r.data.state === 'waiting', 'b1 still waiting: ' + r.data.state);
  await page.goto(BASE + '/#/q/db');
  await until('the queue page shows 1 waiting', async () =>
    (await page.textContent('.qhead .stat[data-stat="waiting"] b')) === '1');
  check(consoleErrors.length === 0, 'console errors: ' + consoleErrors.join(' | '));
} catch (e) {
  check(false, 'exception: ' + (e.stack || e));
  await page.screenshot({ path: `${ART}/deps-failure.png`, fullPage: true }).catch(() => {});
} finally {
  await browser.close();
}
finish();
