// A flame graph (or icicle) drawn on one canvas: a node is a rectangle, not a DOM element, so
// 100k nodes draw in milliseconds. The numbers come from the server's slice as they are; this
// only scales them to pixels. Keyboard: arrows move between frames, Enter zooms, Escape zooms out.
import { el } from './dom.js';

const ROW = 18;
const CHAR = 6.7; // average advance of the 11px monospace font

function hash(text) {
  let h = 2166136261;
  const n = Math.min(text.length, 256);
  for (let i = 0; i < n; i += 1) h = Math.imul(h ^ text.charCodeAt(i), 16777619) >>> 0;
  return h;
}

function warm(name) {
  const h = hash(name);
  return `rgb(${205 + (h % 50)},${((h >>> 8) % 200) + 30},${(h >>> 16) % 55})`;
}

// Colour-blind-safe diverging scale (ColorBrewer PuOr): orange = share grew, purple = shrank.
function diffColour(change, peak) {
  const t = peak > 0 ? Math.min(Math.abs(change) / peak, 1) : 0;
  const [r, g, b] = change > 0 ? [230, 97, 1] : [94, 60, 153];
  const mix = (c) => Math.round(242 + (c - 242) * (0.15 + 0.85 * t));
  return change === 0 ? 'rgb(236,236,236)' : `rgb(${mix(r)},${mix(g)},${mix(b)})`;
}

export class FlameChart {
  constructor({ label, onZoom, onFocus, onHover, small = false }) {
    this.onZoom = onZoom || (() => {});
    this.onFocus = onFocus || (() => {});
    this.onHover = onHover || (() => {});
    this.label = label;
    this.canvas = el('canvas', { tabindex: 0, role: 'img', 'aria-label': label });
    this.wrap = el('div', { class: `flame-wrap ${small ? 'small' : 'big'}` }, this.canvas);
    this.data = null;
    this.focus = -1;
    this.hover = -1;
    this.canvas.addEventListener('mousemove', (e) => this.mouse(e));
    this.canvas.addEventListener('mouseleave', () => { this.hover = -1; this.onHover(null); });
    this.canvas.addEventListener('click', (e) => {
      const i = this.hit(e);
      if (i >= 0) this.onZoom(this.data.id[i]);
    });
    this.canvas.addEventListener('keydown', (e) => this.key(e));
    this.lastWidth = 0;
    new ResizeObserver(() => {
      if (this.data && this.wrap.clientWidth !== this.lastWidth) this.draw();
    }).observe(this.wrap);
  }

  setData(slice, { icicle = true, focusId = null } = {}) {
    const nodes = slice.nodes;
    const n = nodes.id.length;
    const d = { ...nodes, names: slice.names, n, icicle };
    d.maxDepth = 0;
    for (let i = 0; i < n; i += 1) if (nodes.depth[i] > d.maxDepth) d.maxDepth = nodes.depth[i];
    d.rows = Array.from({ length: d.maxDepth + 1 }, () => []);
    for (let i = 0; i < n; i += 1) d.rows[nodes.depth[i]].push(i); // pre-order: left to right per row
    d.kids = new Map();
    for (let i = 1; i < n; i += 1) {
      const p = nodes.parent[i];
      if (!d.kids.has(p)) d.kids.set(p, []);
      d.kids.get(p).push(i);
    }
    d.search = Boolean(nodes.match);
    d.diff = Boolean(nodes.change);
    d.peak = 0;
    if (d.diff) for (const c of nodes.change) d.peak = Math.max(d.peak, Math.abs(c));
    this.data = d;
    const at = focusId === null ? -1 : nodes.id.indexOf(focusId);
    this.focus = at;
    this.canvas.setAttribute('aria-label', `${this.label}: ${n.toLocaleString('en')} frames drawn. `
      + 'Arrow keys move between frames, Enter zooms into the selected frame, Escape zooms out; '
      + 'the selected frame is described below the graph.');
    this.draw();
  }

  y(depth) {
    const d = this.data;
    return (d.icicle ? depth : d.maxDepth - depth) * ROW;
  }

  draw() {
    const d = this.data;
    if (!d) return;
    const t0 = performance.now();
    const width = Math.max(this.wrap.clientWidth, 200);
    this.lastWidth = this.wrap.clientWidth;
    const height = (d.maxDepth + 1) * ROW;
    const ratio = window.devicePixelRatio || 1;
    this.canvas.width = Math.round(width * ratio);
    this.canvas.height = Math.round(height * ratio);
    this.canvas.style.width = `${width}px`;
    this.canvas.style.height = `${height}px`;
    const ctx = this.canvas.getContext('2d');
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, width, height);
    const scale = d.n ? width / Math.max(d.width[0], 1) : 0;
    this.scale = scale;
    // Frames too narrow to keep were merged into their parent's "hidden" width: one grey band.
    ctx.fillStyle = 'rgb(200,200,200)';
    for (let i = 0; i < d.n; i += 1) {
      if (d.hidden[i] > 0 && d.depth[i] < d.maxDepth + 1) {
        const w = (d.width[i] - Math.max(d.self[i], 0)) * scale;
        ctx.fillRect(d.start[i] * scale, this.y(d.depth[i] + 1), w, ROW - 1);
      }
    }
    ctx.font = '11px ui-monospace, monospace';
    ctx.textBaseline = 'middle';
    for (let i = 0; i < d.n; i += 1) {
      const x = d.start[i] * scale;
      const w = d.width[i] * scale;
      const y = this.y(d.depth[i]);
      const name = d.names[d.name[i]];
      if (d.search) ctx.fillStyle = d.match[i] ? 'rgb(179,0,122)' : 'rgb(222,222,222)';
      else if (d.diff) ctx.fillStyle = diffColour(d.change[i], d.peak);
      else ctx.fillStyle = i === 0 ? 'rgb(190,190,190)' : warm(name);
      ctx.fillRect(x, y, Math.max(w - 0.5, 0.35), ROW - 1);
      if (w > 28) {
        const chars = Math.floor((w - 6) / CHAR);
        const text = name.length > chars ? `${name.slice(0, Math.max(chars - 1, 1))}…` : name;
        ctx.fillStyle = d.search && d.match[i] ? '#fff' : '#000';
        ctx.fillText(text, x + 3, y + ROW / 2);
      }
    }
    if (this.focus >= 0) {
      const i = this.focus;
      ctx.strokeStyle = '#000';
      ctx.lineWidth = 2;
      ctx.strokeRect(d.start[i] * scale + 1, this.y(d.depth[i]) + 1, Math.max(d.width[i] * scale - 2, 2), ROW - 3);
    }
    this.drawMs = performance.now() - t0;
    this.canvas.dataset.drawMs = this.drawMs.toFixed(1);
    this.canvas.dataset.frames = String(d.n);
  }

  hit(event) {
    const d = this.data;
    if (!d) return -1;
    const box = this.canvas.getBoundingClientRect();
    const x = event.clientX - box.left;
    const row = Math.floor((event.clientY - box.top) / ROW);
    const depth = d.icicle ? row : d.maxDepth - row;
    const list = d.rows[depth];
    if (!list) return -1;
    let lo = 0;
    let hi = list.length - 1;
    while (lo <= hi) { // nodes of a row are in x order
      const mid = (lo + hi) >> 1;
      const i = list[mid];
      const left = d.start[i] * this.scale;
      if (x < left) hi = mid - 1;
      else if (x >= left + d.width[i] * this.scale) lo = mid + 1;
      else return i;
    }
    return -1;
  }

  mouse(event) {
    const i = this.hit(event);
    this.canvas.style.cursor = i >= 0 ? 'pointer' : 'default';
    if (i === this.hover) return;
    this.hover = i;
    this.onHover(i >= 0 ? { id: this.data.id[i], name: this.data.names[this.data.name[i]], x: event.clientX, y: event.clientY } : null);
  }

  setFocus(i) {
    if (i < 0 || !this.data) return;
    this.focus = i;
    this.draw();
    const top = this.y(this.data.depth[i]);
    if (top < this.wrap.scrollTop || top + ROW > this.wrap.scrollTop + this.wrap.clientHeight) {
      this.wrap.scrollTop = Math.max(top - this.wrap.clientHeight / 2, 0);
    }
    this.onFocus(this.data.id[i]);
  }

  key(event) {
    const d = this.data;
    if (!d || !d.n) return;
    const i = this.focus >= 0 ? this.focus : 0;
    const row = d.rows[d.depth[i]];
    const widestChild = () => {
      const kids = d.kids.get(i) || [];
      return kids.reduce((best, k) => (best < 0 || d.width[k] > d.width[best] ? k : best), -1);
    };
    const up = d.icicle ? d.parent[i] : widestChild();
    const down = d.icicle ? widestChild() : d.parent[i];
    const moves = {
      ArrowLeft: row[row.indexOf(i) - 1], ArrowRight: row[row.indexOf(i) + 1],
      ArrowUp: up, ArrowDown: down, Home: 0,
    };
    if (event.key in moves) {
      event.preventDefault();
      if (this.focus < 0) this.setFocus(0);
      else if (moves[event.key] !== undefined && moves[event.key] >= 0) this.setFocus(moves[event.key]);
    } else if (event.key === 'Enter' || event.key === ' ') {
      event.preventDefault();
      this.onZoom(d.id[i]);
    } else if (event.key === 'Escape') {
      event.preventDefault();
      this.onZoom(null);
    }
  }
}
