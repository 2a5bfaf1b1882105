// One function per page: view(root, params, ctx) fills `root` and returns a cleanup function
// (unsubscribe, stop timers) called when the user leaves the page.

import { canAct, segment, session } from './api.js';
import { lineChart } from './charts.js';
import {
  actionButton,
  facts,
  fmtBytes,
  fmtDuration,
  fmtNumber,
  fmtTime,
  h,
  link,
  table,
} from './dom.js';

const PAGE = 50;

function title(text, ...extra) {
  return h('div', { class: 'title' }, h('h2', null, text), extra);
}

function viewerNote() {
  return h(
    'p',
    { class: 'muted', hidden: canAct() },
    `You are logged in as ${session.role}: actions need the operator role.`,
  );
}

/** Re-run `fn` at most once per `ms` however many events ask for it. */
function debounce(fn, ms) {
  let timer = null;
  const run = () => {
    clearTimeout(timer);
    timer = setTimeout(fn, ms);
  };
  run.cancel = () => clearTimeout(timer);
  return run;
}

/** A filter form whose inputs are named after the API's query parameters. */
function filterForm(fields, values, onApply) {
  const inputs = fields.map(([name, label, placeholder]) =>
    h('input', { name, id: `filter-${name}`, value: values[name] || '', placeholder: placeholder || '' }),
  );
  const form = h(
    'form',
    { class: 'filters' },
    fields.map(([, label], i) => h('label', null, label, inputs[i])),
    h('button', { type: 'submit' }, 'Apply'),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const next = {};
    fields.forEach(([name], i) => {
      next[name] = inputs[i].value.trim();
    });
    onApply(next);
  });
  return form;
}

function pager(total, offset, onMove) {
  if (total <= PAGE) return h('p', { class: 'muted' }, `${total} in all`);
  const last = Math.min(offset + PAGE, total);
  return h(
    'div',
    { class: 'pager' },
    h('button', { type: 'button', disabled: offset === 0, onclick: () => onMove(Math.max(0, offset - PAGE)) }, '‹ Previous'),
    ` ${offset + 1}–${last} of ${total} `,
    h('button', { type: 'button', disabled: last >= total, onclick: () => onMove(offset + PAGE) }, 'Next ›'),
  );
}

/**
 * A page of one list: a heading, a filter form whose inputs are named after the API's query
 * parameters, the list as `render(data)` draws it, and paging with `paged`. Returns `reload`.
 */
function listPage(root, { heading, id, fields = [], paged = false, fetch, render, isCurrent }) {
  let filters = {};
  let offset = 0;
  const body = h('div', { id });
  async function load() {
    const data = await fetch(paged ? { ...filters, offset, limit: PAGE } : { ...filters });
    if (!isCurrent()) return;
    body.replaceChildren(
      render(data),
      paged
        ? pager(data.total, offset, (next) => {
            offset = next;
            reload();
          })
        : '',
    );
  }
  // a failed reload is already on screen as the notice of the request that failed
  const reload = () => load().catch(() => {});
  const form = fields.length
    ? filterForm(fields, filters, (next) => {
        filters = next;
        offset = 0;
        reload();
      })
    : '';
  root.append(...heading, form, body);
  return { load, reload };
}

/** An operator's button: runs `call`, tells how it went, then runs `after` (a reload). */
function operatorAction(label, call, success, { notify, after, confirm = true }) {
  return actionButton(
    label,
    async () => {
      try {
        const answer = await call();
        notify(typeof success === 'function' ? success(answer) : success);
      } catch (err) {
        notify(err.message, 'error');
      }
      if (after) await after();
    },
    { confirm, disabled: !canAct() },
  );
}

// ---------------------------------------------------------------- dashboard

async function dashboard(root, _params, { api, stream, history }) {
  const overview = await api.get('overview');
  const summary = h('div', { class: 'cards' });
  const limits = h('section', { class: 'card' });

  function renderSummary(o, live) {
    const connections = live?.connections ?? o.connections;
    const memory = live?.memory ?? o.memory ?? {};
    summary.replaceChildren(
      stat('Connections', fmtNumber(connections), 'stat-connections'),
      stat('Offline sessions', fmtNumber(o.sessions)),
      stat('In / out per s', `${fmtNumber(live?.rates?.in_per_s ?? o.rates?.in_per_s, 1)} / ${fmtNumber(live?.rates?.out_per_s ?? o.rates?.out_per_s, 1)}`),
      stat('Memory', `${fmtBytes(memory.rss_bytes)} of ${fmtBytes(memory.budget_bytes)}`),
      stat('Store', o.store?.state ?? '—'),
      stat('Policy bundle', o.policy?.bundle_version ?? 'none', null, o.policy?.signer ? `signed by ${o.policy.signer}` : ''),
      stat('Version', o.version ?? '—', null, `up ${fmtDuration(o.uptime_s)}`),
    );
    const hits = Object.entries(o.limit_hits || {}).filter(([, n]) => n);
    limits.replaceChildren(
      h('h3', null, 'Limit hits'),
      hits.length
        ? facts(hits.map(([name, n]) => [name, fmtNumber(n)]))
        : h('p', { class: 'muted' }, 'No limit was hit.'),
    );
  }

  function stat(label, value, id, sub) {
    return h('section', { class: 'card stat', id }, h('h3', null, label), h('p', { class: 'big' }, value), sub ? h('p', { class: 'muted' }, sub) : null);
  }

  const rate = (v) => `${fmtNumber(v, 1)}/s`;
  const charts = [
    lineChart(
      'Message rates',
      [
        { name: 'in', cls: 'series-a', history: history.inRate },
        { name: 'out', cls: 'series-b', history: history.outRate },
      ],
      { format: rate, id: 'chart-rates' },
    ),
    lineChart('Clients', [{ name: 'connected', cls: 'series-a', history: history.clients }], {
      format: (v) => fmtNumber(v),
      id: 'chart-clients',
    }),
    lineChart('Bridge backlog', [{ name: 'queued', cls: 'series-b', history: history.backlog }], {
      format: (v) => fmtNumber(v),
      id: 'chart-backlog',
    }),
    lineChart(
      'Memory against the budget',
      [
        { name: 'RSS', cls: 'series-a', history: history.rss },
        { name: 'budget', cls: 'series-limit', history: history.budget },
      ],
      { format: fmtBytes, id: 'chart-memory' },
    ),
  ];

  if (history.clients.values.length === 0) {
    // the first point before the stream's first event (2 s): what the overview said just now
    history.inRate.push(overview.rates?.in_per_s);
    history.outRate.push(overview.rates?.out_per_s);
    history.clients.push(overview.connections);
    history.rss.push(overview.memory?.rss_bytes);
    history.budget.push(overview.memory?.budget_bytes);
    for (const chart of charts) chart.redraw();
  }
  renderSummary(overview, history.latest);
  root.append(
    title('Dashboard', h('span', { class: 'muted live' }, 'live, every 2 s')),
    summary,
    h('div', { class: 'charts' }, charts.map((c) => c.element)),
    limits,
  );

  let current = overview;
  const off = stream.on('counters', (live) => {
    renderSummary(current, live);
    for (const chart of charts) chart.redraw();
  });
  // the slow-moving facts (sessions, store, policy, limit hits) are re-read every 30 s
  const timer = setInterval(async () => {
    try {
      current = await api.get('overview');
      renderSummary(current, history.latest);
    } catch {
      // the notice of a failed request would repeat every 30 s; the stream shows the state
    }
  }, 30000);
  return () => {
    off();
    clearInterval(timer);
  };
}

// ---------------------------------------------------------------- clients

const CLIENT_FILTERS = [
  ['id', 'Client id', 'glob, e.g. sensor-*'],
  ['tenant', 'Tenant'],
  ['principal', 'Principal'],
  ['method', 'Method', 'password, token, …'],
  ['address', 'Address'],
];

async function clients(root, _params, { api, stream, isCurrent }) {
  const lastChange = h('span', { class: 'muted live', id: 'clients-live' }, 'live');
  const page = listPage(root, {
    heading: [title('Clients', lastChange)],
    id: 'clients-table',
    fields: CLIENT_FILTERS,
    paged: true,
    isCurrent,
    fetch: (query) => api.get('clients', query),
    render: (data) =>
      table(
        [
          { title: 'Client id', value: (c) => link(c.client_id, 'clients', c.client_id) },
          { title: 'Principal', value: (c) => c.principal ?? '—' },
          { title: 'Method', value: (c) => c.method ?? '—' },
          { title: 'Tenant', value: (c) => c.tenant ?? '—' },
          { title: 'Address', value: (c) => c.address ?? '—' },
          { title: 'Protocol', value: (c) => String(c.protocol ?? '—') },
          { title: 'Connected', value: (c) => fmtTime(c.connected_at) },
        ],
        data.items,
        {
          empty: 'No client is connected (or none matches the filter).',
          rowAttrs: (c) => ({ 'data-client-id': c.client_id }),
        },
      ),
  });
  const reload = debounce(page.reload, 300);
  const off = stream.on('client', (change) => {
    lastChange.textContent = `live — ${change.client_id} ${change.change}`;
    reload();
  });
  await page.load();
  return () => {
    off();
    reload.cancel();
  };
}

async function clientDetail(root, [clientId], { api, stream, notify, isCurrent }) {
  const body = h('div', { id: 'client-detail' });
  const back = link('‹ all clients', 'clients');
  back.classList.add('back');
  root.append(title('Client', h('code', { class: 'client-id' }, clientId)), back, body);

  async function load() {
    let c;
    try {
      c = await api.get(`clients/${segment(clientId)}`);
    } catch (err) {
      if (err.status !== 404) throw err;
      if (isCurrent()) body.replaceChildren(h('p', { class: 'muted', id: 'not-connected' }, 'This client is not connected.'));
      return;
    }
    if (!isCurrent()) return;
    body.replaceChildren(
      h('section', { class: 'card' }, facts([
        ['Client id', c.client_id],
        ['Principal', c.principal ?? '—'],
        ['Method', c.method ?? '—'],
        ['Tenant', c.tenant ?? '—'],
        ['Address', c.address ?? '—'],
        ['Protocol', String(c.protocol ?? '—')],
        ['Connected', fmtTime(c.connected_at)],
        ['Keep alive', c.keep_alive === undefined ? '—' : `${c.keep_alive} s`],
        ['In flight', fmtNumber(c.in_flight)],
        ['Queued', fmtNumber(c.queued)],
      ]),
      h('div', { class: 'actions' },
        operatorAction(
          'Disconnect',
          () => api.post(`clients/${segment(clientId)}/disconnect`, {}),
          `Disconnected ${clientId}.`,
          { notify, after: () => load().catch(() => {}), confirm: false },
        ),
      ),
      viewerNote()),
      h('h3', null, 'Subscriptions'),
      table(
        [
          { title: 'Filter', value: (s) => s.filter },
          { title: 'QoS', value: (s) => String(s.qos), class: 'num' },
        ],
        c.subscriptions || [],
        { empty: 'No subscription.' },
      ),
      h('h3', null, 'Claims owned'),
      table(
        [
          { title: 'Pattern', value: (x) => x.pattern },
          { title: 'Expires', value: (x) => fmtTime(x.expires) },
        ],
        c.claims || [],
        { empty: 'No claim.' },
      ),
    );
  }

  const off = stream.on('client', (change) => {
    if (change.client_id === clientId) load().catch(() => {});
  });
  await load();
  return off;
}

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

async function denials(root, _params, { api, stream, isCurrent }) {
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

// ---------------------------------------------------------------- subscriptions

async function subscriptions(root, _params, { api, isCurrent }) {
  const page = listPage(root, {
    heading: [title('Subscriptions')],
    id: 'subscriptions-table',
    fields: [['tenant', 'Tenant']],
    isCurrent,
    fetch: (query) => api.get('subscriptions', query),
    render: (data) =>
      table(
        [
          { title: 'Tenant', value: (x) => x.tenant ?? '—' },
          { title: 'Filter', value: (x) => h('code', null, x.filter) },
          { title: 'Clients', value: (x) => fmtNumber(x.clients), class: 'num' },
        ],
        [...data.items].sort((a, b) =>
          `${a.tenant}\u0000${a.filter}`.localeCompare(`${b.tenant}\u0000${b.filter}`),
        ),
        { empty: 'No subscription (or none in this tenant).' },
      ),
  });
  await page.load();
}

// ---------------------------------------------------------------- sessions

async function sessions(root, _params, { api, notify, isCurrent }) {
  const page = listPage(root, {
    heading: [title('Offline sessions'), viewerNote()],
    id: 'sessions-table',
    isCurrent,
    fetch: () => api.get('sessions'),
    render: (data) =>
      table(
        [
          { title: 'Client id', value: (x) => x.client_id },
          { title: 'Owner', value: (x) => x.owner ?? '—' },
          { title: 'Expires', value: (x) => fmtTime(x.expires_at) },
          { title: 'Queued', value: (x) => fmtNumber(x.queued), class: 'num' },
          {
            title: '',
            value: (x) =>
              operatorAction(
                'Drop',
                () => api.del(`sessions/${segment(x.client_id)}`),
                `Dropped the session of ${x.client_id}; its client id is free again.`,
                { notify, after: () => page.reload() },
              ),
          },
        ],
        data.items,
        { empty: 'No offline session.', rowAttrs: (x) => ({ 'data-client-id': x.client_id }) },
      ),
  });
  await page.load();
}

// ---------------------------------------------------------------- retained

async function retained(root, _params, { api, notify, isCurrent }) {
  const page = listPage(root, {
    heading: [title('Retained messages'), viewerNote()],
    id: 'retained-table',
    fields: [
      ['prefix', 'Topic prefix'],
      ['tenant', 'Tenant'],
    ],
    paged: true,
    isCurrent,
    fetch: (query) => api.get('retained', query),
    render: (data) =>
      table(
        [
          { title: 'Tenant', value: (r) => r.tenant ?? '—' },
          { title: 'Topic', value: (r) => r.topic },
          { title: 'Bytes', value: (r) => fmtNumber(r.bytes), class: 'num' },
          { title: 'QoS', value: (r) => String(r.qos), class: 'num' },
          { title: 'Preview', value: (r) => h('code', { class: 'preview' }, r.preview ?? '') },
          {
            title: '',
            value: (r) =>
              operatorAction(
                'Delete',
                () => api.del('retained', { tenant: r.tenant, topic: r.topic }),
                `Deleted the retained message on ${r.topic}.`,
                { notify, after: () => page.reload() },
              ),
          },
        ],
        data.items,
        {
          empty: 'No retained message (or none matches the filter).',
          rowAttrs: (r) => ({ 'data-topic': r.topic }),
        },
      ),
  });
  await page.load();
}

// ---------------------------------------------------------------- claims

async function claims(root, _params, { api, notify, isCurrent }) {
  const page = listPage(root, {
    heading: [title('Topic claims'), viewerNote()],
    id: 'claims-table',
    fields: [['owner', 'Owner']],
    isCurrent,
    fetch: (query) => api.get('claims', query),
    render: (data) =>
      table(
        [
          { title: 'Id', value: (c) => String(c.id) },
          { title: 'Owner', value: (c) => c.owner },
          { title: 'Pattern', value: (c) => c.pattern },
          { title: 'Expires', value: (c) => fmtTime(c.expires) },
          {
            title: '',
            value: (c) =>
              operatorAction(
                'Revoke',
                () => api.del(`claims/${segment(c.id)}`),
                `Revoked the claim on ${c.pattern}.`,
                { notify, after: () => page.reload() },
              ),
          },
        ],
        data.items,
        { empty: 'No claim (or none of this owner).' },
      ),
  });
  await page.load();
}

// ---------------------------------------------------------------- bridges

function bridgeState(state) {
  const name = String(state);
  return h('span', { class: ['state', `state-${name.replace(/[^a-z_-]/gi, '')}`] }, name);
}

async function bridges(root, _params, { api, stream, isCurrent }) {
  const page = listPage(root, {
    heading: [title('Bridges', h('span', { class: 'muted live' }, 'live'))],
    id: 'bridges-table',
    isCurrent,
    fetch: () => api.get('bridges'),
    render: (data) =>
      table(
        [
          { title: 'Bridge', value: (b) => b.name },
          { title: 'State', value: (b) => bridgeState(b.state) },
          { title: 'Queue', value: (b) => fmtNumber(b.queue_depth), class: 'num' },
          {
            title: 'Counters',
            value: (b) =>
              Object.entries(b.counters || {})
                .map(([k, v]) => `${k} ${v}`)
                .join(' · '),
          },
          { title: 'Last error', value: (b) => b.last_error || '—' },
        ],
        data.items,
        { empty: 'No bridge is configured.' },
      ),
  });
  await page.load();
  const refresh = debounce(page.reload, 100);
  const off = stream.on('counters', refresh);
  return () => {
    off();
    refresh.cancel();
  };
}

// ---------------------------------------------------------------- policy

async function policy(root, _params, { api, notify }) {
  const overview = await api.get('overview');
  const result = h('div', { id: 'explain-result', class: 'explain-result', 'aria-live': 'polite' });
  const kind = h(
    'select',
    { name: 'identity', id: 'explain-identity' },
    h('option', { value: 'user' }, 'user name'),
    h('option', { value: 'principal' }, 'principal'),
    h('option', { value: 'token' }, 'token'),
  );
  const who = h('input', { name: 'who', id: 'explain-who', required: true, placeholder: 'e.g. sensor-7' });
  const clientId = h('input', { name: 'client_id', id: 'explain-client-id', placeholder: 'client id' });
  const action = h(
    'select',
    { name: 'action', id: 'explain-action' },
    h('option', { value: 'publish' }, 'publish to'),
    h('option', { value: 'subscribe' }, 'subscribe to'),
  );
  const topic = h('input', { name: 'topic', id: 'explain-topic', required: true, placeholder: 'topic or filter' });
  const form = h(
    'form',
    { class: 'explain card', id: 'explain-form' },
    h('h3', null, 'Would this client be allowed?'),
    h('div', { class: 'sentence' }, 'Would the client with', kind, who, 'and client id', clientId, 'be allowed to', action, topic, '?'),
    h('button', { type: 'submit' }, 'Ask'),
    result,
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    result.replaceChildren(h('p', { class: 'muted' }, 'Asking…'));
    try {
      const answer = await api.post('explain', {
        [kind.value]: who.value,
        client_id: clientId.value || who.value,
        action: action.value,
        topic: topic.value,
      });
      result.replaceChildren(
        h('p', { class: answer.allowed ? 'verdict allowed' : 'verdict denied' }, answer.allowed ? 'Allowed' : 'Denied'),
        facts([
          ['Gate', answer.gate ?? '—'],
          ['Rule', h('code', { class: 'rule' }, answer.rule ?? '—')],
        ]),
        h('pre', { class: 'explanation' }, answer.explanation || ''),
      );
    } catch (err) {
      result.replaceChildren(h('p', { class: 'error' }, err.message));
    }
  });

  const config = h('pre', { class: 'config', id: 'running-config' }, 'Loading…');
  api.get('config').then(
    (data) => {
      config.textContent = JSON.stringify(data, null, 2);
    },
    (err) => {
      config.textContent = err.message;
    },
  );

  const p = overview.policy || {};
  root.append(
    title('Policy'),
    h(
      'section',
      { class: 'card' },
      h('h3', null, 'Current bundle'),
      facts([
        ['Bundle version', p.bundle_version ?? 'none (local configuration only)'],
        ['Signer', p.signer ?? '—'],
      ]),
      h('div', { class: 'actions' },
        operatorAction(
          'Reload configuration',
          async () => {
            const outcome = await api.post('reload', {});
            // a configuration with errors is refused whole: the message says what to change
            if (outcome?.ok === false) throw new Error(`Reload refused: ${outcome.message}`);
            return outcome;
          },
          (outcome) => `Reloaded: ${outcome?.message ?? 'done'}`,
          { notify },
        ),
      ),
    ),
    form,
    h('section', { class: 'card' }, h('h3', null, 'Running configuration (secrets removed)'), config),
  );
}

function clientsRoute(root, params, ctx) {
  return params.length ? clientDetail(root, params, ctx) : clients(root, params, ctx);
}

export const VIEWS = {
  dashboard,
  clients: clientsRoute,
  denials,
  subscriptions,
  sessions,
  retained,
  claims,
  bridges,
  policy,
};
