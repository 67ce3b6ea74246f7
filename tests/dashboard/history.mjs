// The queue page's history charts in a real browser (Debian's chromium,
// driven by playwright-core): run by tests/dashboard_history.sh, twice:
// PHASE=first after the --demo pool ran 20 jobs on "demo" (the charts show
// them, and again after a reload of the page), PHASE=restarted against a
// new rjq serve process with no job run since (the charts still show them:
// the figures are stored in Redis). Env: BASE, CHROMIUM, ART, PHASE.
import { check, until, openPage, shotShowsOn, finish, tally } from './lib.mjs';

const { BASE, CHROMIUM, ART, PHASE } = process.env;

const { browser, page, errors: consoleErrors } = await openPage({ consoleError: () => true });
const shotShows = (name, selectors) => shotShowsOn(page, name, selectors);

// The charts of the page show the 20 jobs: 20 completed in the history,
// a completed line and a run p50 line drawn.
async function chartsShowTheJobs(when) {
  await until(`${when}: the history says 20 completed`, async () =>
    (await page.locator('#history').getAttribute('data-completed')) === '20');
  check((await page.locator('#chart-throughput polyline[data-series="completed"], #chart-throughput circle.s-done').count()) > 0,
    `${when}: a completed line`);
  check((await page.locator('#chart-latency polyline[data-series="run p50"], #chart-latency circle.s-run').count()) > 0,
    `${when}: a run p50 line`);
  check((await page.locator('#chart-latency polyline[data-series="wait p50"], #chart-latency circle.s-wait').count()) > 0,
    `${when}: a wait p50 line`);
  check((await page.locator('#chart-throughput').getAttribute('data-points')) === '60', `${when}: 60 minutes`);
  const legend = await page.locator('#history .legend').first().textContent();
  check(legend.includes('completed (20)'), `${when}: the legend says 20 completed: ${legend}`);
  // the latency histogram: the 20 jobs' waits and runs, per bucket
  const counted = async (series) => (await page.locator(`#chart-histogram rect[data-series="${series}"]`)
    .evaluateAll(rs => rs.map(r => Number(r.getAttribute('data-count'))))).reduce((a, v) => a + v, 0);
  check(await counted('run') === 20, `${when}: the histogram counts 20 runs`);
  check(await counted('wait') === 20, `${when}: the histogram counts 20 waits`);
  /* the pool runs each job at least 10 ms (20 ms latency, jittered): no run in the first buckets */
  const shortRuns = await page.locator('#chart-histogram rect[data-series="run"]').evaluateAll(rs =>
    rs.filter(r => Number(r.getAttribute('data-bucket')) <= 2).reduce((a, r) => a + Number(r.getAttribute('data-count')), 0));
  check(shortRuns === 0, `${when}: no run of 4 ms or less in the histogram (${shortRuns})`);
  const hlegend = await page.locator('#chart-histogram + .legend').textContent();
  check(hlegend.includes('run (20)') && hlegend.includes('wait (20)'), `${when}: the histogram's legend: ${hlegend}`);
}

try {
  await page.goto(BASE + '/#/q/demo');
  await chartsShowTheJobs(PHASE);
  await shotShows(`history-${PHASE}`, ['#chart-throughput', '#chart-latency', '#chart-histogram', '#history .ranges a.on']);
  await page.reload();
  await chartsShowTheJobs(`${PHASE}, reloaded`);
  await shotShows(`history-${PHASE}-reloaded`, ['#chart-throughput', '#chart-latency', '#chart-histogram']);
  // the 30 days: hours
  await page.click('#history .ranges a[data-range="30d"]');
  await until(`${PHASE}: 720 hours`, async () =>
    (await page.locator('#chart-throughput').getAttribute('data-points')) === '720');
  check((await page.locator('#history').getAttribute('data-completed')) === '20', `${PHASE}: 30d holds the 20`);
  check(consoleErrors.length === 0, 'console errors: ' + consoleErrors.join(' | '));
} catch (e) {
  check(false, String(e && e.stack || e));
  await page.screenshot({ path: `${ART}/history-failure.png`, fullPage: true }).catch(() => {});
}
await browser.close();
finish(`dashboard history (${PHASE}): ${tally.checks - tally.failures}/${tally.checks} checks passed`);
