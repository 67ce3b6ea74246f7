// The job page shows a job's headers (the W3C trace context rjq serve
// copied from the enqueue request), and "none" for a job without: run by
// tests/dashboard_traces.sh, which starts rjq serve (no worker: the jobs
// wait). Env: BASE, TP, CHROMIUM, ART.
import { check, until, openPage, shotShowsOn, finish } from './lib.mjs';

const { BASE, TP, ART } = process.env;

const { browser, page, errors: consoleErrors } = await openPage();
const post = (id, headers) =>
  fetch(`${BASE}/v1/queues/tq/jobs?id=${id}`, { method: 'POST', body: 'x', headers }).then(r => r.status);

try {
  check((await post('traced', { traceparent: TP, tracestate: 'rojo=00f067aa0ba902b7' })) === 201, 'traced enqueued');
  check((await post('plain', {})) === 201, 'plain enqueued');
  await page.goto(BASE + '/#/q/tq/job/traced');
  await until('the job page shows the traceparent header', async () =>
    (await page.textContent('#headers tr[data-header="traceparent"] td')) === TP);
  check((await page.textContent('#headers tr[data-header="tracestate"] td')) === 'rojo=00f067aa0ba902b7',
    'the tracestate header');
  await shotShowsOn(page, 'traces-job', ['#headers tr[data-header="traceparent"] td',
    '#headers tr[data-header="tracestate"] td']);
  await page.goto(BASE + '/#/q/tq/job/plain');
  await until('a job without headers shows none', async () =>
    (await page.textContent('#headers')) === 'none');
  check(consoleErrors.length === 0, 'console errors: ' + consoleErrors.join(' | '));
} catch (e) {
  check(false, 'exception: ' + (e.stack || e));
  await page.screenshot({ path: `${ART}/traces-failure.png`, fullPage: true }).catch(() => {});
} finally {
  await browser.close();
}
finish();
