// rjq dashboard: a queue's history charts (GET /v1/queues/{q}/history,
// README "History"): throughput (enqueued, completed, failed per minute or
// hour), latency (wait and run p50/p99) and the latency histogram (the
// wait and run times of the range's jobs, per log-scale bucket), plain SVG. The figures are
// stored in Redis, so the charts are the same after a reload or a restart
// of rjq serve. historyCharts(name) returns the element; it refreshes
// itself every 10 s while it is in the page.
'use strict';

const CHART_W = 560, CHART_H = 140, CHART_PAD = 34;
const SVGNS = 'http://www.w3.org/2000/svg';

function svgEl(tag, attrs, ...children) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const c of children) e.append(c);
  return e;
}

function chartLabel(v, unit) {
  if (unit === 's') {
    if (v >= 1) return `${+v.toFixed(1)}s`;
    return `${+(v * 1000).toFixed(v < 0.01 ? 1 : 0)}ms`;
  }
  return v >= 1000 ? `${+(v / 1000).toFixed(1)}k` : `${+v.toFixed(v < 10 ? 1 : 0)}`;
}

// A chart's figure: its title, the svg, and a legend of its series (each
// one's name, with its total unless totals is false).
function chartBox(title, svg, series, totals) {
  const legend = document.createElement('div');
  legend.className = 'legend';
  for (const s of series) {
    const sw = document.createElement('span');
    sw.className = 'swatch ' + s.cls;
    const total = s.values.reduce((a, v) => a + (v || 0), 0);
    sw.textContent = totals ? `${s.name} (${chartLabel(total, '')})` : s.name;
    legend.append(sw);
  }
  const box = document.createElement('figure');
  box.className = 'chartbox';
  const cap = document.createElement('figcaption');
  cap.textContent = title;
  box.append(cap, svg, legend);
  return box;
}

// series: [{name, cls, values (null: no point)}], t: the points' times (ms)
function lineChart(id, title, t, series, unit) {
  const all = series.flatMap(s => s.values.filter(v => v !== null));
  const max = Math.max(unit === 's' ? 0.001 : 1, ...all);
  const n = t.length;
  const x = i => CHART_PAD + (n > 1 ? i / (n - 1) : 0) * (CHART_W - CHART_PAD - 4);
  const y = v => CHART_H - 16 - (v / max) * (CHART_H - 24);
  const svg = svgEl('svg', { width: CHART_W, height: CHART_H, viewBox: `0 0 ${CHART_W} ${CHART_H}`,
    class: 'chart', id, 'data-points': n, 'data-max': max });
  svg.append(svgEl('line', { x1: CHART_PAD, y1: y(0), x2: CHART_W - 4, y2: y(0), class: 'axis' }));
  svg.append(svgEl('text', { x: 2, y: y(max) + 4, class: 'tick' }, chartLabel(max, unit)));
  svg.append(svgEl('text', { x: 2, y: y(0) + 4, class: 'tick' }, '0'));
  if (n) {
    const d = new Date(t[0]), e = new Date(t[n - 1]);
    const hm = x => x.toTimeString().slice(0, 5);
    svg.append(svgEl('text', { x: CHART_PAD, y: CHART_H - 2, class: 'tick' }, hm(d)));
    svg.append(svgEl('text', { x: CHART_W - 40, y: CHART_H - 2, class: 'tick' }, hm(e)));
  }
  for (const s of series) {
    // a polyline per run of points that have a value
    let run = [];
    const flush = () => {
      if (run.length === 1) svg.append(svgEl('circle', { cx: run[0][0], cy: run[0][1], r: 1.5, class: s.cls }));
      else if (run.length) svg.append(svgEl('polyline', { points: run.map(p => p.join(',')).join(' '), class: s.cls, 'data-series': s.name }));
      run = [];
    };
    s.values.forEach((v, i) => { if (v === null) flush(); else run.push([x(i).toFixed(1), y(v).toFixed(1)]); });
    flush();
  }
  return chartBox(title, svg, series, unit !== 's');
}

// A bucket's bound (seconds; null: +Inf) as a short label.
function boundLabel(b, prev) {
  return b === null ? `>${chartLabel(prev, 's')}` : `≤${chartLabel(b, 's')}`;
}

// The histogram of the range: series [{name, cls, values: a count per
// bucket}], bounds: the buckets' upper bounds (seconds; the last null).
// Only the buckets from the first to the last one with a count are drawn
// (a bar per series in each), labelled with their bounds.
function histogramChart(id, title, bounds, series) {
  let lo = bounds.length, hi = -1;
  for (const s of series) s.values.forEach((v, i) => { if (v > 0) { lo = Math.min(lo, i); hi = Math.max(hi, i); } });
  if (hi < 0) lo = 0, hi = 0;
  const n = hi - lo + 1, max = Math.max(1, ...series.flatMap(s => s.values.slice(lo, hi + 1)));
  const slot = (CHART_W - CHART_PAD - 4) / n, bw = Math.max(1, slot / (series.length + 1));
  const y = v => CHART_H - 16 - (v / max) * (CHART_H - 24);
  const svg = svgEl('svg', { width: CHART_W, height: CHART_H, viewBox: `0 0 ${CHART_W} ${CHART_H}`,
    class: 'chart histogram', id, 'data-buckets': n, 'data-max': max });
  svg.append(svgEl('line', { x1: CHART_PAD, y1: y(0), x2: CHART_W - 4, y2: y(0), class: 'axis' }));
  svg.append(svgEl('text', { x: 2, y: y(max) + 4, class: 'tick' }, chartLabel(max, '')));
  svg.append(svgEl('text', { x: 2, y: y(0) + 4, class: 'tick' }, '0'));
  const every = Math.ceil(n / 8); /* (at most 8 bound labels) */
  for (let i = lo; i <= hi; i++) {
    const x0 = CHART_PAD + (i - lo) * slot;
    series.forEach((s, k) => {
      const v = s.values[i] || 0;
      const label = `${s.name} ${boundLabel(bounds[i], bounds[i - 1])}: ${v}`;
      svg.append(svgEl('rect', { x: (x0 + k * bw).toFixed(1), y: y(v).toFixed(1), width: bw.toFixed(1),
        height: (y(0) - y(v)).toFixed(1), class: s.cls, 'data-series': s.name, 'data-bucket': i, 'data-count': v },
        svgEl('title', {}, label)));
    });
    if ((i - lo) % every === 0)
      svg.append(svgEl('text', { x: x0.toFixed(1), y: CHART_H - 2, class: 'tick' }, boundLabel(bounds[i], bounds[i - 1])));
  }
  return chartBox(title, svg, series, true);
}

function historyCharts(name) {
  const root = document.createElement('section');
  root.className = 'history';
  root.id = 'history';
  let range = '1h';
  const bar = document.createElement('div');
  bar.className = 'ranges';
  const charts = document.createElement('div');
  charts.className = 'charts';
  const status = document.createElement('span');
  status.className = 'muted';
  for (const r of ['1h', '24h', '30d']) {
    const a = document.createElement('a');
    a.href = '#';
    a.textContent = r;
    a.dataset.range = r;
    a.onclick = (ev) => { ev.preventDefault(); range = r; load(); };
    bar.append(a);
  }
  bar.append(status);
  root.append(bar, charts);
  let timer = null;
  async function load() {
    for (const a of bar.querySelectorAll('a')) a.classList.toggle('on', a.dataset.range === range);
    try {
      // (api: app.js's, with the dashboard's token)
      const d = (await api('GET', `/v1/queues/${encodeURIComponent(name)}/history?range=${range}&buckets=1`)).data;
      const p = d.points;
      const t = p.map(x => x.t);
      const per = d.step_ms === 60000 ? 'minute' : 'hour';
      status.textContent = ` per ${per}, stored in Redis`;
      charts.replaceChildren(
        lineChart('chart-throughput', `jobs per ${per}`, t, [
          { name: 'enqueued', cls: 's-enq', values: p.map(x => x.enqueued) },
          { name: 'completed', cls: 's-done', values: p.map(x => x.completed) },
          { name: 'failed', cls: 's-fail', values: p.map(x => x.failed) }], ''),
        lineChart('chart-latency', 'wait and run time (p50, p99)', t, [
          { name: 'wait p50', cls: 's-wait', values: p.map(x => x.wait_p50) },
          { name: 'wait p99', cls: 's-wait99', values: p.map(x => x.wait_p99) },
          { name: 'run p50', cls: 's-run', values: p.map(x => x.run_p50) },
          { name: 'run p99', cls: 's-run99', values: p.map(x => x.run_p99) }], 's'),
        histogramChart('chart-histogram', `wait and run times of the ${range}'s jobs (jobs per bucket)`, d.bounds, [
          { name: 'wait', cls: 's-wait', values: d.bounds.map((_, i) => p.reduce((a, x) => a + (x.wait ? x.wait[i] : 0), 0)) },
          { name: 'run', cls: 's-run', values: d.bounds.map((_, i) => p.reduce((a, x) => a + (x.run ? x.run[i] : 0), 0)) }]));
      root.dataset.loaded = String(Date.now());
      root.dataset.completed = String(p.reduce((a, x) => a + x.completed, 0));
    } catch (e) {
      status.textContent = ' ' + e.message;
    }
    clearTimeout(timer);
    timer = setTimeout(() => { if (root.isConnected) load(); }, 10000);
  }
  setTimeout(load, 0);
  root.reload = load; /* (Redis back: read again at once) */
  return root;
}
