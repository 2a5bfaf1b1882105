// Small hand-drawn SVG line charts: a fixed viewBox scaled to the card's width, polylines whose
// points are recomputed from a bounded history, and the numbers (legend, scale) as HTML text.

import { h, s } from './dom.js';

const WIDTH = 300;
const HEIGHT = 100;

/** A bounded series of samples; `limit` keeps memory flat however long the page stays open. */
export class History {
  constructor(limit = 150) {
    this.limit = limit;
    this.values = [];
  }

  push(value) {
    this.values.push(Number.isFinite(value) ? value : null);
    if (this.values.length > this.limit) this.values.splice(0, this.values.length - this.limit);
  }

  last() {
    return this.values.length ? this.values[this.values.length - 1] : null;
  }
}

const MIN_SLOTS = 30; // a minute of samples: a young chart is drawn wide, not as a sliver

function points(values, limit, max) {
  const slots = Math.min(limit, Math.max(values.length, MIN_SLOTS));
  const step = WIDTH / Math.max(slots - 1, 1);
  const offset = slots - values.length;
  const out = [];
  values.forEach((value, i) => {
    if (value === null) return;
    const x = (offset + i) * step;
    const y = HEIGHT - (Math.min(value, max) / max) * HEIGHT;
    out.push(`${x.toFixed(1)},${y.toFixed(1)}`);
  });
  return out.join(' ');
}

/** A nice round ceiling for the scale: 1, 2, 5 × 10^n. */
function niceMax(value) {
  if (!(value > 0)) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  for (const factor of [1, 2, 5, 10]) {
    if (value <= factor * power) return factor * power;
  }
  return 10 * power;
}

/**
 * lineChart('Message rates', [{name, cls, history, format}], {format}) → {element, redraw()}.
 * Each series' `cls` picks its colour in app.css (.series-a, .series-b, .series-limit).
 */
export function lineChart(title, series, { format = (v) => String(v), id } = {}) {
  const lines = series.map((item) =>
    s('polyline', {
      class: ['line', item.cls],
      fill: 'none',
      'vector-effect': 'non-scaling-stroke',
    }),
  );
  const grid = [0.25, 0.5, 0.75].map((f) =>
    s('line', {
      class: 'gridline',
      x1: 0,
      x2: WIDTH,
      y1: HEIGHT * f,
      y2: HEIGHT * f,
      'vector-effect': 'non-scaling-stroke',
    }),
  );
  const svg = s(
    'svg',
    {
      class: 'chart',
      viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
      preserveAspectRatio: 'none',
      role: 'img',
      'aria-label': title,
    },
    grid,
    lines,
  );
  const values = series.map(() => h('span', { class: 'legend-value' }, '—'));
  const scale = h('span', { class: 'scale' }, '');
  const element = h(
    'section',
    { class: 'card chart-card', id },
    h('h3', null, title, scale),
    h(
      'div',
      { class: 'legend' },
      series.map((item, i) =>
        h('span', { class: 'legend-item' }, h('span', { class: ['swatch', item.cls] }), item.name, ' ', values[i]),
      ),
    ),
    svg,
  );

  function redraw() {
    let top = 0;
    for (const item of series) {
      for (const v of item.history.values) if (v !== null && v > top) top = v;
    }
    const max = niceMax(top);
    scale.textContent = ` (scale ${format(max)})`;
    series.forEach((item, i) => {
      lines[i].setAttribute('points', points(item.history.values, item.history.limit, max));
      const last = item.history.last();
      values[i].textContent = last === null ? '—' : (item.format || format)(last);
    });
  }

  redraw();
  return { element, redraw };
}
