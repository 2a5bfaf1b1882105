// The denials feed (live) and a denial's explanation.

import { facts, fmtTime, h } from './dom.js';
import { title } from './widgets.js';

// ---------------------------------------------------------------- denials

function denialDetail(d) {
  return [
    h('h3', null, 'Why was this denied?'),
    facts([
      ['Time', fmtTime(d.time)],
      ['Client id', d.client_id ?? '—'],
      ['Principal', d.principal ?? '—'],
      ['Request', d.kind ?? '—'],
      ['Topic', d.topic ?? '—'],
      ['Gate', d.gate ?? '—'],
      ['Rule', h('code', { class: 'rule' }, d.rule ?? '—')],
      ['Reason', d.reason ?? '—'],
    ]),
    h('h4', null, 'Explanation'),
    h('pre', { class: 'explanation' }, d.explanation || 'No explanation was recorded.'),
  ];
}

export async function denials(root, _params, { api, stream, isCurrent }) {
  const KEEP = 200;
  const data = await api.get('denials', { limit: 50 });
  if (!isCurrent()) return null;
  const seen = new Set();
  const tbody = h('tbody');
  const empty = h('p', { class: 'muted empty' }, 'No request was denied lately.');
  const list = h(
    'div',
    { class: 'denial-list', id: 'denials-list' },
    h(
      'table',
      { class: 'grid' },
      h('thead', null, h('tr', null, ['Time', 'Client id', 'Request', 'Topic', 'Rule', ''].map((t) => h('th', null, t)))),
      tbody,
    ),
    empty,
  );
  const detail = h('aside', { class: 'card denial-detail', id: 'denial-detail' }, h('p', { class: 'muted' }, 'Pick a denial to read its explanation.'));

  // A new denial becomes one new row on top; the rows already shown stay as they are, so a
  // row being read or clicked never jumps away under a busy feed.
  function row(d) {
    const tr = h(
      'tr',
      { class: 'denial' },
      h('td', null, fmtTime(d.time)),
      h('td', null, d.client_id ?? '—'),
      h('td', null, d.kind ?? '—'),
      h('td', null, d.topic ?? '—'),
      h('td', null, d.rule ?? '—'),
      h('td', null, h('button', { type: 'button', class: 'link why', onclick: () => select(d, tr) }, 'Why?')),
    );
    return tr;
  }

  function add(d, atTop) {
    const key = d.seq ?? `${d.time}|${d.client_id}|${d.topic}`;
    if (seen.has(key)) return; // the stream and the first read may both carry one denial
    seen.add(key);
    if (atTop) tbody.prepend(row(d));
    else tbody.append(row(d));
    while (tbody.children.length > KEEP) tbody.lastElementChild.remove();
    empty.hidden = tbody.children.length > 0;
  }

  function select(d, tr) {
    for (const other of tbody.querySelectorAll('tr.selected')) other.classList.remove('selected');
    tr.classList.add('selected');
    detail.replaceChildren(...denialDetail(d));
  }

  for (const d of data.items) add(d, false);
  empty.hidden = tbody.children.length > 0;
  const off = stream.on('denial', (d) => add(d, true));
  root.append(
    title('Denials', h('span', { class: 'muted live' }, 'live, newest first')),
    h('div', { class: 'split' }, list, detail),
  );
  return off;
}
