// The page's whole state lives in the URL query, so a link reopens the same view and
// back/forward walk through it. Option names are the API's (focus, sample_index, ...).

let onChange = () => {};

export function listen(callback) {
  onChange = callback;
  window.addEventListener('popstate', () => onChange());
}

export function params() {
  return new URLSearchParams(window.location.search);
}

export function get(name, fallback = '') {
  const value = params().get(name);
  return value === null ? fallback : value;
}

// Change some keys (null or '' removes one). A new history entry unless replace; silent
// changes only record the state (the view already shows it: a table sorted in place).
export function navigate(changes, { replace = false, silent = false } = {}) {
  const p = params();
  for (const [key, value] of Object.entries(changes)) {
    if (value === null || value === undefined || value === '' || value === false) p.delete(key);
    else p.set(key, value === true ? '1' : String(value));
  }
  const query = p.toString();
  const url = `${window.location.pathname}${query ? `?${query}` : ''}`;
  if (url === `${window.location.pathname}${window.location.search}`) return;
  if (replace) window.history.replaceState(null, '', url);
  else window.history.pushState(null, '', url);
  if (!silent) onChange();
}
