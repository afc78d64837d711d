// DOM helpers. Every string from a profile goes into the page as a text node or an
// attribute value set with setAttribute, never as HTML: names are data, not markup.

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === 'class') node.className = value;
    else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
    else if (key === 'dataset') Object.assign(node.dataset, value);
    else node.setAttribute(key, value === true ? '' : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// Names can be megabytes long: show the start and say how long they are.
export function clip(text, max = 400) {
  const s = String(text);
  return s.length > max ? `${s.slice(0, max)}… (${s.length.toLocaleString('en')} characters)` : s;
}

export function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
  return node;
}

export function button(label, onclick, attrs = {}) {
  return el('button', { type: 'button', onclick, ...attrs }, label);
}

// A sortable, filterable table of rows. columns: [{key, label, text(row), value(row), cls}]
export function dataTable({ columns, rows, sort, desc, onSort, caption, limit = 1000, rowAttrs }) {
  const ordered = rows.slice();
  const col = columns.find((c) => c.key === sort);
  if (col) {
    const val = col.value || col.text;
    ordered.sort((a, b) => {
      const x = val(a), y = val(b);
      const cmp = typeof x === 'number' && typeof y === 'number' ? x - y : String(x).localeCompare(String(y));
      return desc ? -cmp : cmp;
    });
  }
  const head = el('tr', {}, columns.map((c) => el('th', {
    scope: 'col', class: c.cls || '',
    'aria-sort': c.key === sort ? (desc ? 'descending' : 'ascending') : (c.sortable === false ? null : 'none'),
  }, c.sortable === false ? c.label : button(c.label, () => onSort && onSort(c.key, c.key === sort ? !desc : true),
    { title: `sort by ${c.label}` }))));
  const body = el('tbody');
  const shown = ordered.slice(0, limit);
  for (const row of shown) {
    body.append(el('tr', rowAttrs ? rowAttrs(row) : {}, columns.map((c) => el('td', { class: c.cls || '' },
      c.cell ? c.cell(row) : c.text(row)))));
  }
  const table = el('table', {}, caption ? el('caption', { class: 'note' }, caption) : null, el('thead', {}, head), body);
  const wrap = el('div', { class: 'table-wrap' }, table);
  if (ordered.length > shown.length) {
    const more = button(`show all ${ordered.length.toLocaleString('en')} rows`, () => {
      wrap.replaceWith(dataTable({ columns, rows, sort, desc, onSort, caption, limit: Infinity, rowAttrs }));
    });
    return el('div', {}, wrap, more);
  }
  return wrap;
}
