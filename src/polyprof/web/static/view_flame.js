// The flame graph view (with the top table under it: the landing page) and the sandwich view.
import * as api from './api.js';
import { button, clip, el } from './dom.js';
import { FlameChart } from './flamechart.js';
import * as page from './page.js';
import * as state from './state.js';
import { topTable } from './view_tables.js';

const tip = () => document.getElementById('tip');

function baseParam() {
  const base = page.baseInput();
  return base ? base.index : -1;
}

// Numbers of one node, as the server formats them.
function nodeLines(n) {
  const lines = [`flat ${n.text.self} (${n.text.self_percent}) · cum ${n.text.total} (${n.text.total_percent})`];
  if (n.text.base_total !== undefined) {
    lines.push(`base cum ${n.text.base_total} (${n.text.base_total_percent}) · share ${n.text.share_change}`);
  }
  return lines;
}

function describeNode(box, n, extra = []) {
  box.replaceChildren(el('div', { class: 'name' }, clip(n.name, 2000)), ...nodeLines(n).map((l) => el('div', {}, l)),
    n.identity && n.identity.file ? el('div', { class: 'note' }, `file ${clip(n.identity.file)}${n.identity.line ? `:${n.identity.line}` : ''}`) : null,
    n.identity && n.identity.module ? el('div', { class: 'note' }, `module ${clip(n.identity.module)}`) : null,
    ...extra);
}

// A flame chart wired to the API: hover shows a tooltip, focus describes the node in `details`.
function chart({ label, params, details, onZoom, small = false, remember = 'sel', endpoint = 'node' }) {
  const fetchNode = (id) => api.get(endpoint, params({ id }), { remember: true });
  let hoverTimer = null;
  let focused = null;
  let hovered = null;
  return new FlameChart({
    label, small, onZoom,
    onHover: (h) => {
      clearTimeout(hoverTimer);
      hovered = h ? h.id : null;
      const box = tip();
      if (!h) { box.hidden = true; return; }
      box.textContent = clip(h.name, 600);
      box.style.left = `${Math.min(h.x + 14, window.innerWidth - 420)}px`;
      box.style.top = `${h.y + 16}px`;
      box.hidden = false;
      hoverTimer = setTimeout(async () => {
        const n = await fetchNode(h.id);
        if (!box.hidden && hovered === h.id) box.textContent = [clip(n.name, 600), ...nodeLines(n)].join('\n');
      }, 40);
    },
    onFocus: async (id) => {
      if (remember) state.navigate({ [remember]: id }, { replace: true, silent: true });
      focused = id;
      const n = await fetchNode(id);
      if (focused === id) describeNode(details, n); // answers can arrive out of order: the last key wins
    },
  });
}

function searchBox(onSearch) {
  const input = el('input', { type: 'search', value: state.get('q'), 'aria-label': 'search frames (regular expression)',
    placeholder: 'search (regexp)', spellcheck: 'false' });
  let timer = null;
  input.addEventListener('input', () => {
    clearTimeout(timer);
    timer = setTimeout(() => onSearch(input.value, true), 500);
  });
  input.addEventListener('keydown', (e) => {
    if (e.key === 'Enter') { clearTimeout(timer); onSearch(input.value, false); }
  });
  return input;
}

export async function renderFlame(main, gen) {
  const zoom = state.get('zoom', '0');
  const inverted = state.get('inv') === '1';
  const icicle = state.get('orient') !== 'flame';
  const q = state.get('q');
  const params = (extra) => api.optionParams({ b: baseParam(), inverted: inverted ? 1 : null, ...extra });
  const share = el('span', { role: 'status', class: 'share' });
  const crumbs = el('nav', { class: 'crumbs', 'aria-label': 'zoom path' });
  const details = el('div', { class: 'details', 'aria-live': 'polite' }, 'Hover over a frame, or focus the graph and use the arrow keys.');
  const legend = el('span', { class: 'legend note' });
  const fc = chart({
    label: inverted ? 'Inverted flame graph (callers above callees)' : 'Flame graph',
    params, details,
    onZoom: (id) => state.navigate({ zoom: id === null ? (crumbs.dataset.up || null) : id, sel: id }),
  });
  main.append(
    el('div', { class: 'toolbar' },
      searchBox((value, replace) => state.navigate({ q: value }, { replace })), share,
      button(icicle ? 'root at bottom' : 'root at top', () => state.navigate({ orient: icicle ? 'flame' : null }),
        { title: 'flame graph (root at the bottom) or icicle (root at the top)' }),
      el('label', { class: 'check' }, el('input', { type: 'checkbox', checked: inverted, onchange: (e) => state.navigate({ inv: e.target.checked, zoom: null, sel: null }) }), ' inverted (callers of leaf functions)'),
      button('reset zoom', () => state.navigate({ zoom: null }), { disabled: zoom === '0' }),
      legend),
    crumbs, fc.wrap, details,
    el('h2', {}, 'Top'), el('div', { id: 'flame-top' }, 'loading…'));
  page.status('computing the flame graph…');
  // The flame graph is asked for first and drawn as soon as it arrives; the top table follows.
  // Resolution: nodes narrower than a quarter pixel are merged (the URL may ask for more or less).
  const slicePromise = api.get('flame', params({ root: zoom, search: q,
    min_fraction: state.get('min_fraction') || 1 / (4 * Math.max(main.clientWidth, 400)), max_nodes: state.get('max_nodes') || null }));
  // The table (up to a thousand rows of DOM) is built once the graph is painted, not before it.
  let drawn;
  const flameDrawn = new Promise((resolve) => { drawn = resolve; });
  slicePromise.catch(() => drawn()); // a graph that fails must not hold the table back
  const topAnswer = Promise.all([api.get('top', api.tableParams()), flameDrawn]).then(([top]) => {
    if (page.stale(gen)) return;
    page.unmatchedWarning(top.unmatched);
    document.getElementById('flame-top').replaceWith(topTable(top, { id: 'flame-top' }));
  }).catch((err) => { if (!page.stale(gen)) page.showError(err); });
  const slice = await slicePromise;
  if (page.stale(gen)) return;
  page.status(`${slice.graph_nodes.toLocaleString('en')} frames in the graph, ${slice.nodes.id.length.toLocaleString('en')} drawn`
    + (slice.merged ? `, ${slice.merged.toLocaleString('en')} narrower than ${slice.min_width_text} merged into grey bands (zoom in to see them)` : ''));
  const path = slice.path;
  crumbs.dataset.up = path.length ? path[path.length - 1].id : '';
  crumbs.replaceChildren(el('ol', {}, [...path.map((a) => el('li', {}, button(clip(a.name, 80), () => state.navigate({ zoom: a.id || null }), { title: clip(a.name, 1000) }))),
    el('li', { 'aria-current': 'location' }, clip(slice.names[slice.nodes.name[0]], 120))]));
  if (slice.search) {
    share.textContent = `matches ${slice.search.share_text} of the total (${slice.search.matched_text})`
      + (path.length ? `, ${slice.search.zoom_share_text} of this zoom` : '');
    share.dataset.share = String(slice.search.share);
  }
  if (slice.nodes.change) {
    legend.replaceChildren(el('span', { class: 'swatch', dataset: { c: 'grow' } }), 'orange: share grew',
      el('span', { class: 'swatch', dataset: { c: 'shrink' } }), 'purple: share shrank');
  }
  const sel = state.get('sel');
  fc.setData(slice, { icicle, focusId: sel === '' ? null : Number(sel) });
  requestAnimationFrame(() => setTimeout(drawn));
  if (sel !== '') describeNode(details, await api.get('node', params({ id: sel }), { remember: true }));
  await topAnswer;
}

// Callers and callees of one function as two small flame graphs, with peek's tables.
export async function renderSandwich(main, gen) {
  const name = state.get('fn');
  if (!name) {
    main.append(el('p', {}, 'Pick a function: click a row of the top table.'), el('div', { id: 'sw-top' }));
    const top = await api.get('top', api.tableParams());
    if (!page.stale(gen)) document.getElementById('sw-top').replaceWith(topTable(top, { id: 'sw-top' }));
    return;
  }
  const details = el('div', { class: 'details', 'aria-live': 'polite' });
  const params = (side) => (extra) => api.optionParams({ fn: name, side, ...extra });
  // A click on a frame opens that function's own sandwich (speedscope's habit).
  const openNode = async (side, id) => {
    if (id === null) return;
    const n = await api.get('sandwich', params(side)({ id }), { remember: true });
    if (n.depth > 0) state.navigate({ fn: n.name });
  };
  const callers = chart({ label: `Callers of ${clip(name, 200)} (the function at the top, its callers below)`, small: true,
    params: params('callers'), details, remember: null, endpoint: 'sandwich', onZoom: (id) => openNode('callers', id) });
  const callees = chart({ label: `Callees of ${clip(name, 200)}`, small: true, params: params('callees'), details,
    remember: null, endpoint: 'sandwich', onZoom: (id) => openNode('callees', id) });
  const head = el('div', {}, 'loading…');
  main.append(head, el('h2', {}, 'Callers'), callers.wrap, el('h2', {}, 'Callees'), callees.wrap, details,
    el('div', { class: 'cols', id: 'sw-tables' }));
  const answer = await api.get('sandwich', api.optionParams({ fn: name }));
  if (page.stale(gen)) return;
  head.replaceChildren(el('h2', {}, el('span', { class: 'name' }, clip(name, 2000))),
    el('div', {}, `flat ${answer.text.flat} (${answer.text.flat_percent}) · cum ${answer.text.cum} (${answer.text.cum_percent})`));
  callers.setData(answer.callers, { icicle: true });
  callees.setData(answer.callees, { icicle: true });
  const edges = (title, list) => {
    const head = el('tr', {}, ['weight', 'share', 'function'].map((h) => el('th', { scope: 'col', class: h === 'function' ? 'name' : '' }, h)));
    const rows = list.map((e) => el('tr', {}, el('td', {}, e.text), el('td', {}, e.percent),
      el('td', { class: 'name' }, button(clip(e.name), () => state.navigate({ fn: e.name })))));
    return el('div', {}, el('h2', {}, title),
      el('div', { class: 'table-wrap' }, el('table', {}, el('thead', {}, head), el('tbody', {}, rows))));
  };
  document.getElementById('sw-tables').replaceChildren(edges('Called by', answer.callers_list), edges('Calls', answer.callees_list));
}
