// The timeline: weight per thread (or process) over time as a heat map; dragging over it
// sets time_range for every view (FlameScope-style). The thread table selects threads.
import * as api from './api.js';
import { button, clip, dataTable, el } from './dom.js';
import * as page from './page.js';
import * as state from './state.js';
import { topTable } from './view_tables.js';

const ROW = 16;

function ms(ns) { return `${(ns / 1e6).toFixed(ns < 1e7 ? 3 : 1)}ms`; }

// Sequential single-hue scale (light to dark blue, logarithmic): readable with any colour vision.
function shade(v, peak) {
  if (v <= 0) return null;
  const t = 0.15 + 0.85 * (Math.log1p(v) / Math.log1p(peak));
  return `rgb(${Math.round(222 - 214 * t)},${Math.round(235 - 187 * t)},${Math.round(247 - 140 * t)})`;
}

function heatmap(t, onBrush) {
  const canvas = el('canvas', { tabindex: 0, role: 'img', 'aria-label': `weight over time per ${t.group}; drag to select a time range (or use the fields below)` });
  const wrap = el('div', { class: 'heat' }, canvas);
  const bins = t.counts.length ? t.counts[0].length : 0;
  const span = t.end - t.start;
  let brush = t.window ? [t.window[0] ?? t.start, t.window[1] ?? t.end] : null;
  const draw = () => {
    const width = Math.max(wrap.clientWidth, 300);
    const height = Math.max(t.counts.length, 1) * ROW;
    const ratio = window.devicePixelRatio || 1;
    canvas.width = width * ratio; canvas.height = height * ratio;
    canvas.style.width = `${width}px`; canvas.style.height = `${height}px`;
    const ctx = canvas.getContext('2d');
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.fillStyle = '#fafafa';
    ctx.fillRect(0, 0, width, height);
    const bw = width / Math.max(bins, 1);
    t.counts.forEach((row, r) => row.forEach((v, b) => {
      const c = shade(v, t.peak);
      if (c) { ctx.fillStyle = c; ctx.fillRect(b * bw, r * ROW, Math.max(bw, 1), ROW - 1); }
    }));
    if (brush) {
      const x0 = ((brush[0] - t.start) / span) * width;
      const x1 = ((brush[1] - t.start) / span) * width;
      ctx.fillStyle = 'rgba(255,191,71,0.25)';
      ctx.fillRect(x0, 0, x1 - x0, height);
      ctx.strokeStyle = '#b36b00';
      ctx.strokeRect(x0, 0, x1 - x0, height);
    }
    canvas.dataset.bins = String(bins);
  };
  const at = (e) => {
    const box = canvas.getBoundingClientRect();
    const f = Math.min(Math.max((e.clientX - box.left) / box.width, 0), 1);
    return Math.round(t.start + f * span);
  };
  let from = null;
  canvas.addEventListener('pointerdown', (e) => {
    canvas.setPointerCapture(e.pointerId);
    from = at(e);
    brush = [from, from];
    draw();
  });
  canvas.addEventListener('pointermove', (e) => {
    if (from === null) return;
    const x = at(e);
    brush = [Math.min(from, x), Math.max(from, x)];
    draw();
  });
  canvas.addEventListener('pointerup', () => {
    if (from === null) return;
    from = null;
    if (brush && brush[1] > brush[0]) onBrush(brush[0], brush[1]);
  });
  new ResizeObserver(draw).observe(wrap);
  return { wrap, draw };
}

export async function renderTimeline(main, gen) {
  const group = state.get('group', 'thread');
  const t = await api.get('timeline', api.optionParams({ group, bins: 400 }));
  if (page.stale(gen)) return;
  const setRange = (a, b) => state.navigate({ time_range: a === null && b === null ? null : `${a ?? ''}:${b ?? ''}`, zoom: null, sel: null });
  const groupSel = el('select', { 'aria-label': 'one row per', onchange: (e) => state.navigate({ group: e.target.value === 'thread' ? null : e.target.value }) },
    el('option', { value: 'thread' }, 'thread'), el('option', { value: 'process' }, 'process'));
  groupSel.value = group;
  const toolbar = el('div', { class: 'toolbar' }, el('label', {}, 'one row per ', groupSel));
  main.append(toolbar);
  if (t.has_time) {
    const from = el('input', { type: 'text', value: t.window && t.window[0] !== null ? t.window[0] : '', 'aria-label': 'time range start (ns from the profile start)', size: 14 });
    const to = el('input', { type: 'text', value: t.window && t.window[1] !== null ? t.window[1] : '', 'aria-label': 'time range end (ns)', size: 14 });
    toolbar.append(el('span', {}, 'time range (ns) '), from, ' to ', to,
      button('apply', () => setRange(from.value.trim() === '' ? null : from.value.trim(), to.value.trim() === '' ? null : to.value.trim())),
      button('whole profile', () => setRange(null, null), { disabled: !t.window }));
    const map = heatmap(t, (a, b) => setRange(a, b));
    const labels = el('ol', { 'aria-label': `${group}s drawn, heaviest first` },
      t.threads.slice(0, t.counts.length).map((th) => el('li', { title: clip(th.label, 300) }, clip(th.label, 80))));
    main.append(el('div', { class: 'timeline' }, labels, map.wrap,
      el('div', { class: 'axis' }, el('span', {}, ms(t.start)), el('span', {}, ms((t.start + t.end) / 2)), el('span', {}, ms(t.end)))),
    el('p', { class: 'note' }, `${t.counts.length} of ${t.threads.length} ${group}s drawn; bins of ${ms(t.bin_nanos)}; times from the profile start`
      + (t.untimed ? `; ${t.untimed} weight without a time` : '')));
  } else {
    main.append(el('p', {}, 'The samples of this profile have no timestamps: only the thread table is available.'));
  }
  const pick = (th) => (group === 'process'
    ? state.navigate({ pid: th.pid === null ? null : th.pid, zoom: null, sel: null })
    : state.navigate({ tid: th.tid === null ? null : th.tid, zoom: null, sel: null }));
  const columns = [
    { key: 'label', label: group, cls: 'name', text: (r) => r.label,
      cell: (r) => ((group === 'process' ? r.pid : r.tid) === null ? clip(r.label) : button(clip(r.label), () => pick(r), { title: `show only this ${group}` })) },
    { key: 'pid', label: 'pid', text: (r) => (r.pid === null ? '' : r.pid), value: (r) => r.pid ?? -1 },
    { key: 'tid', label: 'tid', text: (r) => (r.tid === null ? '' : r.tid), value: (r) => r.tid ?? -1 },
    { key: 'samples', label: 'samples', text: (r) => r.samples.toLocaleString('en'), value: (r) => r.samples },
    { key: 'weight', label: t.sample_type, text: (r) => r.text.weight, value: (r) => r.weight },
    { key: 'percent', label: 'share', text: (r) => r.text.percent, value: (r) => r.percent },
  ];
  const top = el('div', { id: 'tl-top' }, 'loading…');
  main.append(el('div', { class: 'cols' }, el('div', {}, el('h2', {}, `${group[0].toUpperCase()}${group.slice(1)}s`),
    dataTable({ columns, rows: t.threads, caption: 'click one to show only it (sets the tid or pid filter)' })),
  el('div', {}, el('h2', {}, 'Top of the selection'), top)));
  const answer = await api.get('top', api.tableParams());
  if (!page.stale(gen)) top.replaceWith(topTable(answer, { id: 'tl-top' }));
}
