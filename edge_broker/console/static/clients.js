// The clients list (live) and one client's page with its Disconnect button.

import { segment } from './api.js';
import { facts, fmtNumber, fmtTime, h, link, table } from './dom.js';
import { debounce, listPage, operatorAction, title, viewerNote } from './widgets.js';

// ---------------------------------------------------------------- clients

const CLIENT_FILTERS = [
  ['id', 'Client id', 'glob, e.g. sensor-*'],
  ['tenant', 'Tenant'],
  ['principal', 'Principal'],
  ['method', 'Method', 'password, token, …'],
  ['address', 'Address'],
];

export async function clients(root, _params, { api, stream, isCurrent }) {
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
          // a client id is unique within its tenant: the link names both
          { title: 'Client id', value: (c) => link(c.client_id, 'clients', c.client_id, c.tenant ?? '') },
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

export async function clientDetail(root, [clientId, tenant = ''], { api, stream, notify, isCurrent }) {
  const where = tenant ? { tenant } : undefined;
  const body = h('div', { id: 'client-detail' });
  const back = link('‹ all clients', 'clients');
  back.classList.add('back');
  root.append(title('Client', h('code', { class: 'client-id' }, clientId)), back, body);

  async function load() {
    let c;
    try {
      c = await api.get(`clients/${segment(clientId)}`, where);
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
          () => api.post(`clients/${segment(clientId)}/disconnect`, {}, where),
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
    if (change.client_id === clientId && (!tenant || change.tenant === tenant)) load().catch(() => {});
  });
  await load();
  return off;
}
