// Building the page without ever parsing data as HTML: every value goes in as a text node or
// as an attribute set through setAttribute, so a client id like <img src=x onerror=alert(1)>
// is shown as those characters. No inline style either (the CSP forbids it): looks are classes.

const SVG_NS = 'http://www.w3.org/2000/svg';

function setAttributes(el, attrs) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on')) {
      if (typeof value !== 'function') throw new TypeError(`${key} must be a function`);
      el.addEventListener(key.slice(2), value);
    } else if (key === 'style') {
      throw new TypeError('inline style is refused by the CSP: use a class');
    } else if (key === 'class') {
      el.setAttribute('class', Array.isArray(value) ? value.filter(Boolean).join(' ') : value);
    } else {
      el.setAttribute(key, value === true ? '' : String(value));
    }
  }
}

function appendChildren(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** h('td', {class: 'num'}, value) → an element whose strings are text nodes. */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  setAttributes(el, attrs);
  appendChildren(el, children);
  return el;
}

/** The same for SVG elements (charts). */
export function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  setAttributes(el, attrs);
  appendChildren(el, children);
  return el;
}

export function clear(el) {
  el.replaceChildren();
  return el;
}

/** A link inside the console; the target is built from path pieces, each percent-encoded. */
export function link(text, ...pieces) {
  return h('a', { href: '#/' + pieces.map((p) => encodeURIComponent(String(p))).join('/') }, text);
}

/** A table from column definitions {title, value(row) → Node|string, class}. */
export function table(columns, rows, { empty = 'Nothing here.', rowAttrs } = {}) {
  if (!rows.length) return h('p', { class: 'muted empty' }, empty);
  return h(
    'table',
    { class: 'grid' },
    h('thead', null, h('tr', null, columns.map((c) => h('th', { class: c.class }, c.title)))),
    h(
      'tbody',
      null,
      rows.map((row) =>
        h(
          'tr',
          rowAttrs ? rowAttrs(row) : null,
          columns.map((c) => h('td', { class: c.class }, c.value(row))),
        ),
      ),
    ),
  );
}

/** A definition list from [label, value] pairs. */
export function facts(pairs) {
  return h(
    'dl',
    { class: 'facts' },
    pairs.map(([label, value]) => [h('dt', null, label), h('dd', null, value)]),
  );
}

/**
 * A button for an action that changes the broker: the first click arms it ("Confirm …"), the
 * second within 5 s runs `action`. No window.confirm: it blocks the page and tests alike.
 */
export function actionButton(label, action, { confirm = true, disabled = false } = {}) {
  const button = h('button', { type: 'button', class: 'action', disabled }, label);
  let armed = null;
  button.addEventListener('click', async () => {
    if (confirm && !armed) {
      button.textContent = `Confirm: ${label.toLowerCase()}`;
      button.classList.add('armed');
      armed = setTimeout(() => {
        armed = null;
        button.textContent = label;
        button.classList.remove('armed');
      }, 5000);
      return;
    }
    clearTimeout(armed);
    armed = null;
    button.disabled = true;
    button.classList.remove('armed');
    button.textContent = `${label}…`;
    try {
      await action();
    } finally {
      button.disabled = false;
      button.textContent = label;
    }
  });
  return button;
}

export function fmtTime(value) {
  if (value === undefined || value === null || value === '') return '—';
  const date = typeof value === 'number' ? new Date(value * 1000) : new Date(value);
  if (Number.isNaN(date.getTime())) return String(value);
  return date.toLocaleString(undefined, { hour12: false });
}

export function fmtDuration(seconds) {
  if (seconds === undefined || seconds === null) return '—';
  let s = Math.floor(seconds);
  const d = Math.floor(s / 86400);
  s -= d * 86400;
  const hh = Math.floor(s / 3600);
  s -= hh * 3600;
  const mm = Math.floor(s / 60);
  s -= mm * 60;
  return (d ? `${d}d ` : '') + `${hh}h ${mm}m ${s}s`;
}

export function fmtBytes(n) {
  if (n === undefined || n === null) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB'];
  let value = Number(n);
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(unit ? 1 : 0)} ${units[unit]}`;
}

export function fmtNumber(n, digits = 0) {
  if (n === undefined || n === null || Number.isNaN(Number(n))) return '—';
  return Number(n).toFixed(digits);
}
