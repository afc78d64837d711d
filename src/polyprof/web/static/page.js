// What every view shares: the session (inputs, formats), messages, the current input, and
// the render generation (a view drops answers that arrive after the state moved on).
import * as state from './state.js';

const page = { session: null, generation: 0 };
const $ = (id) => document.getElementById(id);

export function setSession(s) { page.session = s; }
export function session() { return page.session; }
export function nextGeneration() { page.generation += 1; return page.generation; }
export function stale(gen) { return gen !== page.generation; }

export function status(text) { $('status').textContent = text || ''; }

export function showError(err) {
  const box = $('error');
  box.hidden = !err;
  box.textContent = err ? String(err.message || err) : '';
}

export function showWarning(text) {
  const box = $('warning');
  box.hidden = !text;
  box.textContent = text || '';
}

export function currentInput() {
  const s = page.session;
  const p = state.get('p');
  return s.inputs[p === '' ? s.default_input : Number(p)] || s.inputs[0];
}

// The base input of a diff: the URL's b, else the --base input, else none.
export function baseInput() {
  const s = page.session;
  if (s.store) { // a store compares cohorts: the base is the URL's base_where (api.js sends it)
    const where = state.get('base_where');
    return where ? { index: -1, name: where } : null;
  }
  const b = state.get('b');
  if (b === '') return s.base === null ? null : s.inputs[s.base];
  return Number(b) >= 0 ? s.inputs[Number(b)] || null : null;
}

export function unmatchedWarning(names) {
  if (names && names.length) showWarning(`${names.join(', ')} matched nothing`);
}
