// The --demo page's four lists (tests/dashboard_demo.sh): jobs enqueued
// from the page show in queued, processing, completed and failed with
// their kind, live, as the page's pool runs, fails and hangs them.
// Env: BASE, CHROMIUM, ART.
import { check, until, openPage, shotShowsOn, finish } from './lib.mjs';

const { BASE, CHROMIUM, ART } = process.env;

const { browser, page, errors: pageErrors } = await openPage();
const shotShows = (name, selectors) => shotShowsOn(page, name, selectors);

const list = (name) => page.locator(`#demo-lists [data-list="${name}"] li[data-id]`);
const kinds = async (name) => (await list(name).evaluateAll(ls => ls.map(l => l.dataset.kind)));
async function setPool(size, fail, hang) {
  for (const [k, v] of [['size', size], ['latency_ms', '5'], ['fail_pct', fail], ['hang_pct', hang]])
    await page.fill(`#demo-pool input[name="${k}"]`, String(v));
  await page.click('#demo-pool button[data-action="demo-pool"]');
  await until(`the pool is set to ${size}`, async () => (await page.textContent('#demo-info')).includes(`pool of ${size},`));
}
async function enqueue(n, kind) {
  await page.fill('#demo-enqueue input[name="n"]', String(n));
  await page.selectOption('#demo-enqueue select', kind);
  await page.click('#demo-enqueue button[data-action="demo-enqueue"]');
}

try {
  await page.goto(BASE + '/');
  await page.waitForSelector('#demo-lists');
  check((await page.locator('#demo-lists .demo-list h3').allTextContents()).map(t => t.split(' ')[0]).join() ===
    'queued,processing,completed,failed', 'four lists in order');
  // queued: no pool, 3 reports wait
  await setPool(0, 0, 0);
  await enqueue(3, 'report');
  await until('queued shows 3 reports, live', async () =>
    (await kinds('queued')).filter(k => k === 'report').length === 3);
  // completed: a pool runs them
  await setPool(2, 0, 0);
  await until('completed shows the 3 reports, queued none', async () =>
    (await kinds('completed')).filter(k => k === 'report').length === 3 && (await list('queued').count()) === 0);
  // failed: every attempt fails (3 attempts, then dead)
  await setPool(2, 100, 0);
  await enqueue(1, 'thumbnail');
  await until('failed shows the thumbnail once its attempts are spent', async () =>
    (await kinds('failed')).includes('thumbnail'), 60000);
  // processing: one slot, its job hangs; the rest wait queued
  await setPool(1, 0, 100);
  await enqueue(3, 'email');
  await until('processing shows a hung email, queued the other two', async () =>
    (await kinds('processing')).join() === 'email' && (await kinds('queued')).join() === 'email,email');
  const shown = ['#demo-lists [data-list="queued"] li[data-kind="email"]',
    '#demo-lists [data-list="processing"] li[data-kind="email"]',
    '#demo-lists [data-list="completed"] li[data-kind="report"]',
    '#demo-lists [data-list="failed"] li[data-kind="thumbnail"]'];
  // (the lists redraw with every event, each from its own requests: wait
  // until all four show their job, then take the screenshot)
  await until('all four lists show their job', async () => {
    for (const sel of shown) if ((await page.locator(sel).count()) === 0) return false;
    return true;
  });
  await shotShows('demo-lists', shown);
  // side by side: one row of four columns
  const tops = await page.locator('#demo-lists .demo-list').evaluateAll(ds => ds.map(d => Math.round(d.getBoundingClientRect().top)));
  check(new Set(tops).size === 1, 'the four lists side by side: ' + tops);
  check(pageErrors.length === 0, 'page errors: ' + pageErrors.join(' | '));
} catch (e) {
  check(false, 'exception: ' + (e.stack || e));
  await page.screenshot({ path: `${ART}/demo-failure.png`, fullPage: true }).catch(() => {});
} finally {
  await browser.close();
}
finish();
