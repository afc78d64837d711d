// The page: header controls, view tabs, the filter bar, and one view at a time, all read
// from and written to the URL (state.js). Every number shown comes from the API as it is.
import * as api from './api.js';
import { setupCohort, showCohort } from './cohort.js';
import { button, clear, el } from './dom.js';
import * as page from './page.js';
import * as state from './state.js';
import { renderFlame, renderSandwich } from './view_flame.js';
import { renderDiff, renderLabels, renderTop } from './view_tables.js';
import { renderTimeline } from './view_timeline.js';
import { renderTree } from './view_tree.js';

const VIEWS = [
  ['flame', 'Flame graph', renderFlame], ['top', 'Top', renderTop], ['sandwich', 'Sandwich', renderSandwich],
  ['tree', 'Call tree', renderTree], ['timeline', 'Timeline', renderTimeline], ['labels', 'Labels', renderLabels],
  ['diff', 'Diff', renderDiff],
];
const FILTERS = [
  ['focus', 'focus', 'keep samples with a frame matching'], ['ignore', 'ignore', 'drop samples with a frame matching'],
  ['hide', 'hide', 'remove matching frames'], ['show', 'show', 'keep only matching frames'],
  ['show_from', 'show from', 'cut stacks above the outermost match'],
  ['prune_from', 'prune from', 'cut stacks below the match'],
  ['tagfocus', 'tagfocus', 'labels: KEY=REGEX or a range'], ['tagignore', 'tagignore', 'drop samples whose labels match'],
  ['pid', 'pid', 'process ids, comma separated'], ['tid', 'tid', 'thread ids, comma separated'],
  ['thread', 'thread', 'thread name regex'], ['time_range', 'time range', 'START:END, e.g. 1s:2.5s (from the profile start)'],
];
// Selections that name nodes of one flame graph: a filter change makes them meaningless.
const NODE_STATE = { zoom: null, sel: null, open: null };

const $ = (id) => document.getElementById(id);

function fillSelect(select, options, value) {
  clear(select);
  for (const [v, label] of options) select.append(el('option', { value: v }, label));
  select.value = value;
}

function header() {
  const session = page.session();
  const input = page.currentInput();
  fillSelect($('input'), session.inputs.map((x) => [String(x.index), `${x.name} (${x.format})`]), String(input.index));
  fillSelect($('sample_index'), [['', `${input.default_sample_type || 'default'} (default)`],
    ...input.sample_types.map((t) => [t.type, `${t.type} (${t.unit})`])], state.get('sample_index'));
  fillSelect($('granularity'), session.granularities.map((g) => [g, g]), state.get('granularity', 'functions'));
  $('noinlines').checked = state.get('noinlines') === '1';
  const nav = clear($('views'));
  const view = state.get('view', 'flame');
  for (const [key, label] of VIEWS) {
    nav.append(button(label, () => state.navigate({ view: key }), {
      role: 'tab', 'aria-selected': String(key === view), id: `tab-${key}`, tabindex: key === view ? 0 : -1,
      'aria-controls': 'main',
    }));
  }
  for (const [name] of FILTERS) $(`f-${name}`).value = state.get(name);
  if (session.store) showCohort();
  updateDownload();
}

function updateDownload() {
  const format = $('download-format').value;
  $('download-link').href = api.url('download', api.optionParams({ format }));
  $('download-note').textContent = '';
}

function setupControls() {
  const session = page.session();
  // Tabs as a tablist: arrow keys move between them, Enter or Space opens one.
  $('views').addEventListener('keydown', (e) => {
    const tabs = [...$('views').querySelectorAll('[role=tab]')];
    const at = tabs.indexOf(document.activeElement);
    const to = { ArrowRight: at + 1, ArrowLeft: at - 1, Home: 0, End: tabs.length - 1 }[e.key];
    if (at < 0 || to === undefined) return;
    e.preventDefault();
    tabs[(to + tabs.length) % tabs.length].focus();
  });
  if (session.store) setupCohort(session.store, NODE_STATE);
  const fields = $('filter-fields');
  for (const [name, label, help] of FILTERS) {
    fields.append(el('label', { title: help }, label, el('input', { type: 'text', id: `f-${name}`, name, spellcheck: 'false' })));
  }
  $('filters').addEventListener('submit', (e) => {
    e.preventDefault();
    const changes = { ...NODE_STATE };
    for (const [name] of FILTERS) changes[name] = $(`f-${name}`).value.trim();
    state.navigate(changes);
  });
  $('clear-filters').addEventListener('click', () => {
    const changes = { ...NODE_STATE };
    for (const [name] of FILTERS) changes[name] = null;
    state.navigate(changes);
  });
  $('input').addEventListener('change', (e) => state.navigate({ ...NODE_STATE, p: e.target.value, sample_index: null }));
  $('sample_index').addEventListener('change', (e) => state.navigate({ ...NODE_STATE, sample_index: e.target.value }));
  $('granularity').addEventListener('change', (e) => state.navigate({
    ...NODE_STATE, granularity: e.target.value === 'functions' ? null : e.target.value }));
  $('noinlines').addEventListener('change', (e) => state.navigate({ ...NODE_STATE, noinlines: e.target.checked }));
  fillSelect($('download-format'), session.writable.map((f) => [f.name, `${f.name} (${f.extension})`]), 'pprof');
  $('download-format').addEventListener('change', async () => {
    updateDownload();
    try {
      const dry = await api.get('download', api.optionParams({ format: $('download-format').value, dry: 1 }));
      $('download-note').textContent = dry.not_kept.length ? `not kept: ${dry.not_kept.join('; ')}` : 'keeps everything';
    } catch (err) {
      $('download-note').textContent = String(err.message);
    }
  });
}

async function render() {
  const gen = page.nextGeneration();
  delete document.body.dataset.ready; // set again once this view is complete (tests wait for it)
  page.showError(null);
  page.showWarning(null);
  header();
  const view = VIEWS.find(([key]) => key === state.get('view', 'flame')) || VIEWS[0];
  const main = clear($('main'));
  main.setAttribute('aria-labelledby', `tab-${view[0]}`);
  document.title = `${view[1]} · ${page.currentInput().name} · polyprof`;
  try {
    await view[2](main, gen);
  } catch (err) {
    if (!page.stale(gen)) page.showError(err);
  }
  if (!page.stale(gen)) document.body.dataset.ready = String(gen);
}

async function boot() {
  let session;
  try {
    session = await api.get('session');
  } catch (err) {
    page.showError(err);
    return;
  }
  page.setSession(session);
  api.setOptionNames(session.options);
  if (!window.location.search && Object.keys(session.defaults).length) {
    window.history.replaceState(null, '', `?${new URLSearchParams(session.defaults)}`);
  }
  setupControls();
  state.listen(render);
  render();
}

boot();
