// Table views: top (also under the flame graph), diff, labels. Cells show the server's text;
// sorting and the filter box only reorder and hide rows that the API returned.
import * as api from './api.js';
import { button, clip, dataTable, el } from './dom.js';
import { FlameChart } from './flamechart.js';
import * as page from './page.js';
import * as state from './state.js';

const num = (key, label, cls = '') => ({ key, label, text: (r) => r.text[key], value: (r) => r[key], cls });
const pctCol = (key, label) => ({ key, label, text: (r) => r.text[key], value: (r) => r[key.replace('_percent', '')] });

function nameFilter(text) {
  if (!text) return () => true;
  let rx = null;
  try { rx = new RegExp(text); } catch (err) { rx = null; }
  return (name) => (rx ? rx.test(name) : name.includes(text));
}

// The top table: flat, flat%, sum%, cum, cum%, name; a click on a name opens its sandwich.
export function topTable(top, { id = 'top-table' } = {}) {
  const box = el('div', { id, class: 'top-box' });
  const filter = el('input', { type: 'search', value: state.get('tf'), placeholder: 'filter rows (regexp)',
    'aria-label': 'filter the table rows by name', spellcheck: 'false' });
  const columns = [
    num('flat', 'flat'), pctCol('flat_percent', 'flat%'),
    { key: 'sum_percent', label: 'sum%', text: (r) => r.text.sum_percent, value: (r) => r.sum_percent, sortable: false },
    num('cum', 'cum'), pctCol('cum_percent', 'cum%'),
    { key: 'name', label: 'name', cls: 'name', text: (r) => r.name,
      cell: (r) => button(clip(r.name) + (r.inline ? ` ${r.inline}` : ''), () => state.navigate({ view: 'sandwich', fn: r.name }),
        { title: `callers and callees of ${clip(r.name, 300)}` }) },
  ];
  const draw = () => {
    const keep = nameFilter(filter.value);
    const rows = top.rows.filter((r) => keep(r.name));
    const sort = state.get('sort');
    const table = dataTable({
      columns, rows, sort: sort || null, desc: state.get('asc') !== '1',
      caption: `${top.sample_type} (${top.unit}): ${rows.length.toLocaleString('en')} of ${top.node_count.toLocaleString('en')} nodes, `
        + `total ${top.header.total}; showing ${top.header.shown_flat} (${top.header.shown_percent})`,
      onSort: (key, desc) => { state.navigate({ sort: key, asc: desc ? null : 1 }, { replace: true, silent: true }); draw(); },
      rowAttrs: (r) => ({ dataset: { flat: r.flat, cum: r.cum } }),
    });
    box.replaceChildren(el('div', { class: 'toolbar' }, filter,
      (top.active_filters || []).length ? el('span', { class: 'note' }, `active filters: ${top.active_filters.join(' ')}`) : null), table);
  };
  filter.addEventListener('input', () => {
    state.navigate({ tf: filter.value }, { replace: true, silent: true });
    const at = filter.selectionStart;
    draw();
    filter.focus();
    filter.setSelectionRange(at, at);
  });
  draw();
  return box;
}

export async function renderTop(main, gen) {
  main.append(el('div', { id: 'top-table' }, 'loading…'));
  const top = await api.get('top', api.tableParams());
  if (page.stale(gen)) return;
  page.unmatchedWarning(top.unmatched);
  document.getElementById('top-table').replaceWith(topTable(top));
}

function baseWherePicker() {
  const input = el('input', { type: 'text', id: 'base-where', 'aria-label': 'base cohort (where)', value: state.get('base_where'),
    spellcheck: 'false', placeholder: "version = '119'" });
  const form = el('form', { class: 'inline', onsubmit: (e) => { e.preventDefault(); state.navigate({ base_where: input.value.trim(), zoom: null, sel: null }); } },
    el('label', {}, 'compare against the cohort where ', input), el('button', { type: 'submit' }, 'compare'));
  return form;
}

function basePicker() {
  const s = page.session();
  if (s.store) return baseWherePicker();
  const p = page.currentInput().index;
  const base = page.baseInput();
  const select = el('select', { 'aria-label': 'base profile', onchange: (e) => state.navigate({ b: e.target.value, zoom: null, sel: null }) },
    el('option', { value: '-1' }, 'none'),
    s.inputs.filter((x) => x.index !== p).map((x) => el('option', { value: String(x.index) }, x.name)));
  select.value = base ? String(base.index) : '-1';
  return el('label', {}, 'compare against ', select);
}

function diffColumns() {
  const col = (key, label) => ({ key, label, text: (r) => r.text[key], value: (r) => r[key] });
  return [
    col('base_flat', 'base flat'), col('new_flat', 'new flat'), col('delta_flat', 'Δ flat'),
    col('base_cum', 'base cum'), col('new_cum', 'new cum'), col('delta_cum', 'Δ cum'),
    { key: 'flat_share_delta', label: 'flat share Δ (points)', text: (r) => r.text.flat_share_delta, value: (r) => r.flat_share_delta },
    { key: 'name', label: 'name', cls: 'name', text: (r) => r.name,
      cell: (r) => button(clip(r.name), () => state.navigate({ view: 'sandwich', fn: r.name })) },
  ];
}

// Diff: the new profile's flame graph coloured by change, and the biggest growths and shrinks.
export async function renderDiff(main, gen) {
  const base = page.baseInput();
  const normalize = state.get('normalize', 'none');
  const select = el('select', { 'aria-label': 'normalisation', onchange: (e) => state.navigate({ normalize: e.target.value === 'none' ? null : e.target.value }) },
    page.session().normalize.map((n) => el('option', { value: n }, n)));
  select.value = normalize;
  main.append(el('div', { class: 'toolbar' }, basePicker(), el('label', {}, 'normalize ', select),
    el('span', { class: 'legend note' }, el('span', { class: 'swatch', dataset: { c: 'grow' } }), 'orange: share grew',
      el('span', { class: 'swatch', dataset: { c: 'shrink' } }), 'purple: share shrank')));
  if (!base) {
    main.append(el('p', {}, page.session().store ? 'No base cohort: give a where predicate above.' : 'No base profile: start polyprof serve with --base BASE, or pick one above.'));
    return;
  }
  const flame = new FlameChart({ label: `Flame graph of ${page.currentInput().name} coloured by change against ${base.name}`,
    small: true, onZoom: (id) => state.navigate({ view: 'flame', zoom: id }) });
  const tables = el('div', {}, 'loading…');
  main.append(flame.wrap, tables);
  const by = 'function';
  const [slice, diff] = await Promise.all([
    api.get('flame', api.optionParams({ b: base.index, min_fraction: 1 / 4000 })),
    api.get('diff', api.optionParams({ b: base.index, normalize, by, nodecount: state.get('nodecount', '0') })),
  ]);
  if (page.stale(gen)) return;
  flame.setData(slice, { icicle: true });
  const grew = diff.functions.filter((f) => f.delta_flat > 0 || (f.delta_flat === 0 && f.delta_cum > 0));
  const shrank = diff.functions.filter((f) => f.delta_flat < 0 || (f.delta_flat === 0 && f.delta_cum < 0));
  const table = (title, rows) => el('div', { class: title.startsWith('Grew') ? 'grow-box' : 'shrink-box' }, el('h2', {}, title),
    dataTable({ columns: diffColumns(), rows, limit: 200, caption: `${rows.length} functions, biggest change first` }));
  tables.replaceChildren(table('Grew', grew), table('Shrank', shrank));
  page.status(`${diff.sample_type}: base total ${diff.totals_text.base}, new total ${diff.totals_text.new}; values ${diff.normalize === 'total' ? 'are shares of each total' : diff.normalize === 'rate' ? 'per second' : 'raw'}`);
}

// Labels: every key with its values and shares; focus/ignore a value, or group the flame graph by a key.
export async function renderLabels(main, gen) {
  const answer = await api.get('labels', api.optionParams());
  if (page.stale(gen)) return;
  if (!answer.keys.length) {
    main.append(el('p', {}, 'The samples of this profile carry no labels.'));
    return;
  }
  for (const key of answer.keys) {
    const rows = key.values.map((v) => el('tr', {},
      el('td', {}, v.text), el('td', {}, v.percent),
      el('td', { class: 'name' }, clip(v.value)),
      el('td', {}, button('focus', () => state.navigate({ tagfocus: v.focus, zoom: null, sel: null }), { 'aria-label': `focus on ${key.key}=${clip(v.value, 100)}` }),
        ' ', button('ignore', () => state.navigate({ tagignore: v.focus, zoom: null, sel: null }), { 'aria-label': `ignore ${key.key}=${clip(v.value, 100)}` }))));
    main.append(el('section', { class: 'label-key' },
      el('h2', {}, clip(key.key, 200), ' ', el('span', { class: 'note' }, `${key.values.length} values, ${key.text}`)),
      answer.group_by ? button(`group the flame graph by ${clip(key.key, 60)}`, () => state.navigate({ view: 'flame', [answer.group_by]: key.key, zoom: null, sel: null })) : null,
      el('div', { class: 'table-wrap' }, el('table', {},
        el('thead', {}, el('tr', {}, ['weight', 'share', 'value', ''].map((h) => el('th', { scope: 'col', class: h === 'value' ? 'name' : '' }, h)))),
        el('tbody', {}, rows)))));
  }
}
