"""The stylesheet and script of the HTML flame graph, inlined into every page.

The script reads the tree from the page's ``application/json`` block and
draws one absolutely positioned ``div.f`` per visible frame. Names reach the
DOM only through ``textContent``, never as markup. No network access: the
page declares a Content-Security-Policy that forbids it.
"""

__all__ = ["PAGE_CSS", "PAGE_JS"]

PAGE_CSS = """
body { margin: 0; font: 13px system-ui, sans-serif; background: #f8f8f4; color: #222; }
header { padding: 8px 12px 4px; }
h1 { font-size: 16px; margin: 0 0 2px; }
#notes { color: #555; font-size: 12px; }
#controls { margin-top: 6px; }
#search { width: 22em; }
#matched { color: #808; margin: 0 8px; }
#chart { position: relative; margin: 4px 10px 10px; }
.f { position: absolute; height: 17px; box-sizing: border-box; padding: 0 3px; overflow: hidden;
     white-space: nowrap; text-overflow: ellipsis; font: 11px/17px monospace; border-radius: 2px;
     border: 1px solid rgba(0,0,0,0.08); cursor: pointer; }
.f:hover { border-color: #000; }
.f.anc { opacity: 0.55; }
.f.m { background: rgb(230,0,230) !important; color: #fff; }
#tip { position: fixed; z-index: 9; white-space: pre-wrap; word-break: break-all; max-width: 60vw;
       background: #fffff0; border: 1px solid #999; padding: 4px 6px; font: 12px monospace;
       pointer-events: none; box-shadow: 2px 2px 4px rgba(0,0,0,0.2); }
"""

PAGE_JS = r"""
(function () {
  'use strict';
  var D = JSON.parse(document.getElementById('data').textContent);
  // Two trees may come: the flame graph and (D.inv) the inverted one, callers above callees.
  var TREES = D.inv ? [D, D.inv] : [D], inverted = false;
  var G, N, T, BT, last, ROW = 18, zoom = 0, icicle = false, re = null, peak = 0, firstDraw = true;
  var chart = document.getElementById('chart'), tip = document.getElementById('tip');
  var search = document.getElementById('search'), matched = document.getElementById('matched');
  function useTree(inv) {
    inverted = inv && TREES.length > 1;
    G = TREES[inverted ? 1 : 0];
    N = G.n.length; T = N ? G.t[0] : 0; BT = G.bt ? G.bt[0] : 0;
    last = new Int32Array(N);  // pre-order index of each node's last descendant
    var open = [];
    for (var i = 0; i < N; i++) {
      while (open.length && G.d[open[open.length - 1]] >= G.d[i]) { last[open.pop()] = i - 1; }
      open.push(i);
    }
    while (open.length) { last[open.pop()] = N - 1; }
    peak = 0;
    if (G.bt) { for (var j = 0; j < N; j++) { peak = Math.max(peak, Math.abs(delta(j))); } }
    var button = document.getElementById('callers');
    if (button) { button.textContent = inverted ? 'callees' : 'callers'; }
  }
  D.notes.forEach(function (line) {
    var div = document.createElement('div');
    div.textContent = line;
    document.getElementById('notes').appendChild(div);
  });

  function name(i) { return D.names[G.n[i]]; }
  function pct(v, t) { return t ? (100 * v / t).toFixed(2) + '%' : 'n/a'; }
  var SCALES = {
    nanoseconds: [[3.6e12, 'hrs'], [1e9, 's'], [1e6, 'ms'], [1e3, 'us'], [1, 'ns']],
    microseconds: [[3.6e9, 'hrs'], [1e6, 's'], [1e3, 'ms'], [1, 'us']],
    milliseconds: [[3.6e6, 'hrs'], [1e3, 's'], [1, 'ms']],
    bytes: [[1 << 30, 'GB'], [1 << 20, 'MB'], [1 << 10, 'kB'], [1, 'B']]
  };
  function fmt(v) {
    var steps = SCALES[D.unit];
    if (!steps) {
      var plain = /^(count|counts|samples?|)$/.test(D.unit);
      return v.toLocaleString('en-US') + (plain ? '' : ' ' + D.unit);
    }
    for (var k = 0; k < steps.length; k++) {
      if (Math.abs(v) >= steps[k][0] || k === steps.length - 1) {
        return (v / steps[k][0]).toFixed(2).replace(/\.00$/, '') + steps[k][1];
      }
    }
  }
  function hash(s) {
    var bytes = new TextEncoder().encode(s), h = 2166136261;
    for (var k = 0; k < bytes.length; k++) { h = Math.imul(h ^ bytes[k], 16777619) >>> 0; }
    return h;
  }
  function delta(i) { return (T ? G.t[i] / T : 0) - (BT ? G.bt[i] / BT : 0); }
  function colour(i) {
    if (G.bt) {
      var dd = delta(i), v = Math.round(235 - 200 * Math.min(Math.abs(dd) / (peak || 1), 1));
      return dd > 0 ? 'rgb(255,' + v + ',' + v + ')' : dd < 0 ? 'rgb(' + v + ',' + v + ',255)' : 'rgb(235,235,235)';
    }
    if (i === 0) { return 'rgb(200,200,200)'; }
    var h = hash(name(i));
    return 'rgb(' + (205 + h % 50) + ',' + ((h >>> 8) % 200 + 30) + ',' + ((h >>> 16) % 55) + ')';
  }
  function tipText(i) {
    var lines = [name(i), 'flat ' + fmt(G.s[i]) + ' (' + pct(G.s[i], T) + '), cum ' + fmt(G.t[i]) +
                 ' (' + pct(G.t[i], T) + ')'];
    if (G.bt) {
      lines.push('base: flat ' + fmt(G.bs[i]) + ' (' + pct(G.bs[i], BT) + '), cum ' + fmt(G.bt[i]) +
                 ' (' + pct(G.bt[i], BT) + ')');
      var dd = 100 * delta(i);
      lines.push('cum share ' + (dd >= 0 ? '+' : '') + dd.toFixed(2) + ' points');
    }
    return lines.join('\n');
  }
  function matches(i) { return re !== null && re.test(name(i)); }

  function render() {
    var W = chart.clientWidth || 1200, rows = [], anc = [];
    for (var a = G.p[zoom]; a >= 0; a = G.p[a]) { anc.push(a); }
    anc.reverse();
    anc.forEach(function (k, r) { rows.push([k, 0, W, r, true]); });
    var scale = G.w[zoom] > 0 ? W / G.w[zoom] : 0, x0 = G.x[zoom], top = anc.length;
    for (var i = zoom; i <= last[zoom];) {
      var w = G.w[i] * scale;
      if (w < 0.5 && i !== zoom) { i = last[i] + 1; continue; }
      rows.push([i, (G.x[i] - x0) * scale, Math.max(w, 0.5), anc.length + G.d[i] - G.d[zoom], false]);
      top = Math.max(top, anc.length + G.d[i] - G.d[zoom]);
      i++;
    }
    var frag = document.createDocumentFragment();
    rows.forEach(function (r) {
      var div = document.createElement('div');
      div.className = 'f' + (r[4] ? ' anc' : '') + (matches(r[0]) ? ' m' : '');
      div.dataset.i = r[0];
      div.textContent = name(r[0]);
      div.style.left = r[1].toFixed(1) + 'px';
      div.style.width = r[2].toFixed(1) + 'px';
      div.style.top = ((icicle ? r[3] : top - r[3]) * ROW) + 'px';
      div.style.background = colour(r[0]);
      frag.appendChild(div);
    });
    chart.textContent = '';
    chart.style.height = ((top + 1) * ROW) + 'px';
    chart.appendChild(frag);
    if (firstDraw && !icicle) {  // deep stacks: open with the root (at the bottom) in view
      firstDraw = false;
      var bottom = chart.getBoundingClientRect().bottom + window.scrollY;
      if (bottom > window.innerHeight) { window.scrollTo(0, bottom - window.innerHeight + 8); }
    }
  }
  function showMatched() {
    if (re === null) { matched.textContent = ''; return; }
    var sum = 0;
    for (var i = 0; i < N;) {
      if (matches(i)) { sum += G.t[i]; i = last[i] + 1; } else { i++; }
    }
    matched.textContent = 'matched ' + fmt(sum) + ' (' + pct(sum, T) + ')';
  }

  function setQuery(q) {
    if (!q) { re = null; } else {
      try { re = new RegExp(q, 'i'); } catch (e) { re = new RegExp(q.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'), 'i'); }
    }
    showMatched();
  }
  // The view state lives in the URL fragment (#q=...&zoom=N&view=icicle): links can share a view.
  function readHash() {
    var h = new URLSearchParams(location.hash.slice(1));
    var inv = h.has('tree') ? h.get('tree') === 'callers' : !!D.startInverted;
    if (inv !== inverted || !G) { useTree(inv); }
    var z = parseInt(h.get('zoom') || '0', 10);
    zoom = z >= 0 && z < N ? z : 0;
    icicle = h.get('view') === 'icicle';
    document.getElementById('invert').textContent = icicle ? 'flame' : 'icicle';
    search.value = h.get('q') || '';
    setQuery(search.value);
  }
  function writeHash() {
    var h = new URLSearchParams();
    if (search.value) { h.set('q', search.value); }
    if (zoom) { h.set('zoom', String(zoom)); }
    if (icicle) { h.set('view', 'icicle'); }
    if (inverted !== !!D.startInverted) { h.set('tree', inverted ? 'callers' : 'callees'); }
    try { history.replaceState(null, '', '#' + h.toString()); } catch (e) { /* e.g. sandboxed frames */ }
  }
  function update() { writeHash(); render(); }

  search.addEventListener('input', function () { setQuery(search.value); update(); });
  chart.addEventListener('click', function (e) {
    var el = e.target.closest('.f');
    if (el) { zoom = +el.dataset.i; update(); }
  });
  chart.addEventListener('mousemove', function (e) {
    var el = e.target.closest('.f');
    if (!el) { tip.hidden = true; return; }
    tip.textContent = tipText(+el.dataset.i);
    tip.hidden = false;
    tip.style.left = Math.min(e.clientX + 12, window.innerWidth - tip.offsetWidth - 4) + 'px';
    tip.style.top = Math.min(e.clientY + 14, window.innerHeight - tip.offsetHeight - 4) + 'px';
  });
  chart.addEventListener('mouseleave', function () { tip.hidden = true; });
  document.getElementById('reset').addEventListener('click', function () { zoom = 0; update(); });
  var callers = document.getElementById('callers');
  if (callers) {
    callers.addEventListener('click', function () { useTree(!inverted); zoom = 0; setQuery(search.value); update(); });
  }
  document.getElementById('invert').addEventListener('click', function (e) {
    icicle = !icicle;
    e.target.textContent = icicle ? 'flame' : 'icicle';
    update();
  });
  document.addEventListener('keydown', function (e) {
    if (e.key === 'Escape') { zoom = 0; update(); }
  });
  window.addEventListener('resize', render);
  window.addEventListener('hashchange', function () { readHash(); render(); });
  readHash();
  render();
})();
"""
