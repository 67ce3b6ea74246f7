// What the dashboard tests' scripts share (tests/dashboard/*.mjs): checks
// counted, an API call, a wait for an event, the browser page and a
// screenshot checked for what it must show. tests/browser_setup.bash copies
// it next to them, into the folder where playwright-core is installed.
// Env: BASE, CHROMIUM, ART.
import { chromium } from 'playwright-core';
import { readFileSync } from 'node:fs';

const { BASE, CHROMIUM, ART } = process.env;
export const tally = { checks: 0, failures: 0 };

export function check(ok, what) {
  tally.checks++;
  if (!ok) { tally.failures++; console.log('FAIL: ' + what); }
}

export async function api(method, path, body) {
  const r = await fetch(BASE + path, { method, body });
  return { status: r.status, data: await r.json().catch(() => null) };
}

// Wait until fn() holds (a check passed), or fail the check `what` after
// ms: a bound on a failing run, not a timing assertion. fn is tried every
// `every` ms.
export async function until(what, fn, ms = 30000, every = 100) {
  const end = Date.now() + ms;
  for (;;) {
    try { if (await fn()) { tally.checks++; return true; } } catch (e) { /* not yet */ }
    if (Date.now() > end) { check(false, what); return false; }
    await new Promise(r => setTimeout(r, every));
  }
}

// Chromium and a page; errors collects the page's errors and, when
// consoleError is given, the console errors it keeps (text => true).
export async function openPage({ width = 1400, height = 900, consoleError = null } = {}) {
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  const page = await browser.newPage({ viewport: { width, height } });
  const errors = [];
  if (consoleError)
    page.on('console', m => { if (m.type() === 'error' && consoleError(m.text())) errors.push(m.text()); });
  page.on('pageerror', e => errors.push(String(e)));
  return { browser, page, errors };
}

// A full-page screenshot, and each element it must show: visible, and
// inside the picture taken (its size read from the PNG header; the box is
// the viewport's, so the page's scroll is added).
export async function shotShowsOn(page, name, selectors) {
  // The page re-renders rows as the stream pushes changes, so an element
  // can be replaced between a wait and the screenshot: wait until every
  // selector is visible, take the shot, and look at it again (up to 5
  // tries) when a row was replaced meanwhile. A selector that never shows
  // fails as before.
  const path = `${ART}/${name}.png`;
  let bad = [];
  for (let attempt = 0; attempt < 5; attempt++) {
    const end = Date.now() + 10000;
    while (Date.now() < end) {
      let all = true;
      for (const sel of selectors)
        if (!(await page.locator(sel).first().isVisible().catch(() => false))) { all = false; break; }
      if (all) break;
      await new Promise(r => setTimeout(r, 100));
    }
    await page.screenshot({ path, fullPage: true });
    const png = readFileSync(path);
    const w = png.readUInt32BE(16), h = png.readUInt32BE(20);
    bad = [];
    for (const sel of selectors) {
      const loc = page.locator(sel).first();
      const box = (await loc.isVisible()) ? await loc.boundingBox() : null;
      const scroll = await page.evaluate(() => [window.scrollX, window.scrollY]);
      if (!(box && box.width > 0 && box.height > 0 && box.x + scroll[0] >= 0 && box.y + scroll[1] >= 0 &&
            box.x + scroll[0] + box.width <= w + 1 && box.y + scroll[1] + box.height <= h + 1))
        bad.push(`${name}.png (${w}x${h}) shows ${sel}: ${JSON.stringify(box)}`);
    }
    if (bad.length === 0) break;
  }
  for (const sel of selectors) {
    const b = bad.find(x => x.includes(` shows ${sel}: `));
    check(!b, b);
  }
}

// The summary line (default: "N checks, M failures") and the exit status.
export function finish(line) {
  console.log(line ?? `${tally.checks} checks, ${tally.failures} failures`);
  process.exit(tally.failures ? 1 : 0);
}
