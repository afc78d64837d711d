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
  var N = D.n.length, ROW = 18, zoom = 0, icicle = false, re = null;
  var chart = document.getElementById('chart'), tip = document.getElementById('tip');
  var search = document.getElementById('search'), matched = document.getElementById('matched');
  var T = N ? D.t[0] : 0, BT = D.bt ? D.bt[0] : 0;
  var last = new Int32Array(N);  // pre-order index of each node's last descendant
  var open = [];
  for (var i = 0; i < N; i++) {
    while (open.length && D.d[open[open.length - 1]] >= D.d[i]) { last[open.pop()] = i - 1; }
    open.push(i);
  }
  while (open.length) { last[open.pop()] = N - 1; }
  D.notes.forEach(function (line) {
    var div = document.createElement('div');
    div.textContent = line;
    document.getElementById('notes').appendChild(div);
  });

  function name(i) { return D.names[D.n[i]]; }
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
  var peak = 0;
  function delta(i) { return (T ? D.t[i] / T : 0) - (BT ? D.bt[i] / BT : 0); }
  if (D.bt) { for (var j = 0; j < N; j++) { peak = Math.max(peak, Math.abs(delta(j))); } }
  function colour(i) {
    if (D.bt) {
      var dd = delta(i), v = Math.round(235 - 200 * Math.min(Math.abs(dd) / (peak || 1), 1));
      return dd > 0 ? 'rgb(255,' + v + ',' + v + ')' : dd < 0 ? 'rgb(' + v + ',' + v + ',255)' : 'rgb(235,235,235)';
    }
    if (i === 0) { return 'rgb(200,200,200)'; }
    var h = hash(name(i));
    return 'rgb(' + (205 + h % 50) + ',' + ((h >>> 8) % 200 + 30) + ',' + ((h >>> 16) % 55) + ')';
  }
  function tipText(i) {
    var lines = [name(i), 'flat ' + fmt(D.s[i]) + ' (' + pct(D.s[i], T) + '), cum ' + fmt(D.t[i]) +
                 ' (' + pct(D.t[i], T) + ')'];
    if (D.bt) {
      lines.push('base: flat ' + fmt(D.bs[i]) + ' (' + pct(D.bs[i], BT) + '), cum ' + fmt(D.bt[i]) +
                 ' (' + pct(D.bt[i], BT) + ')');
      var dd = 100 * delta(i);
      lines.push('cum share ' + (dd >= 0 ? '+' : '') + dd.toFixed(2) + ' points');
    }
    return lines.join('\n');
  }
  function matches(i) { return re !== null && re.test(name(i)); }

  function render() {
    var W = chart.clientWidth || 1200, rows = [], anc = [];
    for (var a = D.p[zoom]; a >= 0; a = D.p[a]) { anc.push(a); }
    anc.reverse();
    anc.forEach(function (k, r) { rows.push([k, 0, W, r, true]); });
    var scale = D.w[zoom] > 0 ? W / D.w[zoom] : 0, x0 = D.x[zoom], top = anc.length;
    for (var i = zoom; i <= last[zoom];) {
      var w = D.w[i] * scale;
      if (w < 0.5 && i !== zoom) { i = last[i] + 1; continue; }
      rows.push([i, (D.x[i] - x0) * scale, Math.max(w, 0.5), anc.length + D.d[i] - D.d[zoom], false]);
      top = Math.max(top, anc.length + D.d[i] - D.d[zoom]);
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
  }
  function showMatched() {
    if (re === null) { matched.textContent = ''; return; }
    var sum = 0;
    for (var i = 0; i < N;) {
      if (matches(i)) { sum += D.t[i]; i = last[i] + 1; } else { i++; }
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
