// Calls to the JSON API. Only this server is ever contacted (the CSP allows nothing else).
import * as state from './state.js';

export class ApiError extends Error {}

let optionNames = [];
export function setOptionNames(names) { optionNames = names; }

// The analysis options and the input of the current URL, as API parameters.
export function optionParams(extra = {}) {
  const current = state.params();
  const out = new URLSearchParams();
  for (const name of [...optionNames, 'p']) {
    const value = current.get(name);
    if (value !== null && value !== '') out.set(name, value);
  }
  for (const [key, value] of Object.entries(extra)) {
    if (value === null || value === undefined || value === '') out.delete(key);
    else out.set(key, String(value));
  }
  return out;
}

// A table shows every node unless the URL says otherwise (the CLI's defaults trim to pprof's 80 rows).
export function tableParams(extra = {}) {
  return optionParams({ nodecount: state.get('nodecount', '0'), nodefraction: state.get('nodefraction', '0'), ...extra });
}

const cache = new Map();
let busy = 0;

// How many answers are awaited (document.body.dataset.busy): tests and screen readers can tell
// when a view is complete.
function track(delta) {
  busy += delta;
  document.body.dataset.busy = String(busy);
  document.body.setAttribute('aria-busy', String(busy > 0));
}

export async function get(endpoint, query = new URLSearchParams(), { remember = false } = {}) {
  const url = `/api/${endpoint}?${query}`;
  if (remember && cache.has(url)) return cache.get(url);
  track(1);
  let response;
  let body;
  try {
    response = await fetch(url, { headers: { Accept: 'application/json' } });
    body = await response.json();
  } catch (err) {
    throw new ApiError(response ? `the server answered ${response.status} without JSON` : `no answer from the server: ${err.message}`);
  } finally {
    track(-1);
  }
  if (!response.ok) throw new ApiError(body.error || `error ${response.status}`);
  if (remember) {
    if (cache.size > 500) cache.clear();
    cache.set(url, body);
  }
  return body;
}

export function url(endpoint, query) {
  return `/api/${endpoint}?${query}`;
}
