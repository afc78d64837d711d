// The call tree: the flame graph as an expandable outline (normal, or inverted: bottom-up),
// children fetched when opened. A treegrid: arrow keys move and open, Enter shows the node in the flame graph.
import * as api from './api.js';
import { button, clip, el } from './dom.js';
import * as page from './page.js';
import * as state from './state.js';

export async function renderTree(main, gen) {
  const inverted = state.get('inv') === '1';
  const open = new Set(state.get('open').split(',').filter(Boolean).map(Number));
  const params = (extra) => api.optionParams({ inverted: inverted ? 1 : null, ...extra });
  const children = new Map();
  const load = async (id) => {
    if (!children.has(id)) children.set(id, (await api.get('calltree', params({ id }), { remember: true })).rows);
    return children.get(id);
  };
  const body = el('tbody');
  const table = el('table', { role: 'treegrid', 'aria-label': inverted ? 'inverted call tree' : 'call tree' },
    el('thead', {}, el('tr', {}, ['name', 'cum', 'cum%', 'flat', 'flat%'].map((h) => el('th', { scope: 'col', class: h === 'name' ? 'name' : '' }, h)))),
    body);
  main.append(el('div', { class: 'toolbar' },
    el('label', {}, el('input', { type: 'checkbox', checked: inverted, onchange: (e) => state.navigate({ inv: e.target.checked, open: null }) }),
      ' inverted (bottom-up: functions with self weight first, their callers inside)'),
    button('collapse all', () => state.navigate({ open: null }))), el('div', { class: 'table-wrap' }, table));
  const rootRows = await load(0);
  // Open nodes whose parents are open, level by level (the URL remembers them).
  const visible = async (rows, depth, out) => {
    for (const r of rows) {
      out.push({ r, depth });
      if (open.has(r.id) && !r.leaf) await visible(await load(r.id), depth + 1, out);
    }
    return out;
  };
  let focusId = null;
  const draw = async () => {
    const list = await visible(rootRows, 0, []);
    if (page.stale(gen)) return;
    body.replaceChildren(...list.map(({ r, depth }, i) => {
      const expanded = open.has(r.id);
      const tr = el('tr', { class: 'tree-row', role: 'row', tabindex: (focusId === null ? i === 0 : focusId === r.id) ? 0 : -1,
        'aria-level': depth + 1, 'aria-expanded': r.leaf ? null : String(expanded), dataset: { id: r.id, total: r.total } },
        el('td', { class: 'name', role: 'gridcell' },
          !r.leaf ? button(expanded ? '▾' : '▸', () => toggle(r.id), { class: 'toggle', tabindex: -1, 'aria-label': expanded ? 'collapse' : 'expand' })
            : el('span', { class: 'toggle' }, ''),
          clip(r.name)),
        el('td', { role: 'gridcell' }, r.text.total), el('td', { role: 'gridcell' }, r.text.total_percent),
        el('td', { role: 'gridcell' }, r.text.self), el('td', { role: 'gridcell' }, r.text.self_percent));
      tr.style.setProperty('--depth', depth);
      tr.addEventListener('keydown', (e) => key(e, r, tr));
      tr.addEventListener('focus', () => { focusId = r.id; });
      return tr;
    }));
    const focused = body.querySelector('tr[tabindex="0"]');
    if (focused && document.activeElement && document.activeElement.closest && document.activeElement.closest('tbody') === body) focused.focus();
  };
  const toggle = async (id) => {
    if (open.has(id)) open.delete(id); else open.add(id);
    focusId = id;
    state.navigate({ open: [...open].join(',') }, { replace: true, silent: true });
    await draw();
    const row = body.querySelector(`tr[data-id="${id}"]`);
    if (row) row.focus();
  };
  const key = (e, r, tr) => {
    const move = (to) => { if (to) { e.preventDefault(); tr.tabIndex = -1; to.tabIndex = 0; to.focus(); } };
    if (e.key === 'ArrowDown') move(tr.nextElementSibling);
    else if (e.key === 'ArrowUp') move(tr.previousElementSibling);
    else if (e.key === 'ArrowRight' && !r.leaf && !open.has(r.id)) { e.preventDefault(); toggle(r.id); }
    else if (e.key === 'ArrowLeft' && open.has(r.id)) { e.preventDefault(); toggle(r.id); }
    else if (e.key === 'Enter') state.navigate({ view: 'flame', zoom: r.id, inv: inverted });
  };
  await draw();
}
