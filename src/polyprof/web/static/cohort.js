// The cohort picker of `polyprof serve --store`: a --where predicate, a --from/--to window and
// the store's facets (columns and label values with their profile counts). The choice lives in
// the URL (where, from, to) and api.js sends it with every request, so every view shows the cohort.
import { clear, el } from './dom.js';
import * as state from './state.js';

const $ = (id) => document.getElementById(id);
const FIELDS = [['where', 'where', 'SQL predicate on profiles, e.g. version = \'120\' AND labels[\'channel\'] = \'beta\''],
  ['from', 'from', 'only samples at or after (2024-05-01, 2024-05-01T12:00 or 1714550400s)'],
  ['to', 'to', 'only samples before']];

const quote = (text) => `'${String(text).replaceAll("'", "''")}'`;

// The condition a facet value adds to the predicate.
function condition(kind, key, value) {
  return kind === 'label' ? `labels[${quote(key)}] = ${quote(value)}` : `${key} = ${quote(value)}`;
}

function facetSelect(kind, key, values, apply) {
  const entries = Object.entries(values);
  const select = el('select', { 'aria-label': `${kind === 'label' ? 'label ' : ''}${key}`, dataset: { facet: `${kind}:${key}` } },
    el('option', { value: '' }, `${kind === 'label' ? `labels[${key}]` : key}…`),
    entries.map(([v, n]) => el('option', { value: v }, `${v} (${n} profile${n === 1 ? '' : 's'})`)));
  select.addEventListener('change', () => {
    if (select.value === '') return;
    const where = $('c-where').value.trim();
    const added = condition(kind, key, select.value);
    $('c-where').value = where ? `${where} AND ${added}` : added;
    apply();
  });
  return select;
}

export function setupCohort(store, nodeState) {
  const form = $('cohort');
  form.hidden = false;
  const fields = clear($('cohort-fields'));
  for (const [name, label, help] of FIELDS) {
    fields.append(el('label', { title: help }, label,
      el('input', { type: 'text', id: `c-${name}`, name, spellcheck: 'false', class: name === 'where' ? 'wide' : '' })));
  }
  const apply = () => {
    const changes = { ...nodeState };
    for (const [name] of FIELDS) changes[name] = $(`c-${name}`).value.trim();
    state.navigate(changes);
  };
  const facets = clear($('cohort-facets'));
  const f = store.facets;
  for (const [column, values] of Object.entries(f.columns)) {
    if (Object.keys(values).length > 1) facets.append(facetSelect('column', column, values, apply));
  }
  for (const [key, values] of Object.entries(f.labels)) facets.append(facetSelect('label', key, values, apply));
  $('cohort-span').textContent = `${f.profiles} profiles${f.time_first ? `, ${f.time_first} to ${f.time_last}` : ''}`;
  form.addEventListener('submit', (e) => { e.preventDefault(); apply(); });
  $('clear-cohort').addEventListener('click', () => {
    for (const [name] of FIELDS) $(`c-${name}`).value = '';
    apply();
  });
}

// The fields show the URL's cohort (after back/forward too); facet menus go back to their title.
export function showCohort() {
  for (const [name] of FIELDS) $(`c-${name}`).value = state.get(name);
  for (const select of $('cohort-facets').querySelectorAll('select')) select.value = '';
}
