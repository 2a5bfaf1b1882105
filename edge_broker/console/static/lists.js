// The list pages: subscriptions, offline sessions, retained messages, claims and bridges.

import { segment } from './api.js';
import { fmtBytes, fmtNumber, fmtTime, h, table } from './dom.js';
import { debounce, listPage, operatorAction, title, viewerNote } from './widgets.js';

// ---------------------------------------------------------------- subscriptions

export async function subscriptions(root, _params, { api, isCurrent }) {
  const page = listPage(root, {
    heading: [title('Subscriptions')],
    id: 'subscriptions-table',
    fields: [['tenant', 'Tenant']],
    paged: true, // sorted by tenant and filter by the broker
    isCurrent,
    fetch: (query) => api.get('subscriptions', query),
    render: (data) =>
      table(
        [
          { title: 'Tenant', value: (x) => x.tenant ?? '—' },
          { title: 'Filter', value: (x) => h('code', null, x.filter) },
          { title: 'Clients', value: (x) => fmtNumber(x.clients), class: 'num' },
        ],
        data.items,
        { empty: 'No subscription (or none in this tenant).' },
      ),
  });
  await page.load();
}

export async function sessions(root, _params, { api, notify, isCurrent }) {
  const page = listPage(root, {
    heading: [title('Offline sessions'), viewerNote()],
    id: 'sessions-table',
    paged: true,
    isCurrent,
    fetch: (query) => api.get('sessions', query),
    render: (data) =>
      table(
        [
          { title: 'Client id', value: (x) => x.client_id },
          { title: 'Tenant', value: (x) => x.tenant ?? '—' },
          { title: 'Owner', value: (x) => x.owner ?? '—' },
          { title: 'Expires', value: (x) => (x.expires_at === null ? 'never' : fmtTime(x.expires_at)) },
          { title: 'Queued', value: (x) => fmtNumber(x.queued), class: 'num' },
          { title: 'Queued bytes', value: (x) => fmtBytes(x.queued_bytes), class: 'num' },
          {
            title: '',
            value: (x) =>
              operatorAction(
                'Drop',
                () => api.del(`sessions/${segment(x.client_id)}`, x.tenant ? { tenant: x.tenant } : undefined),
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

export async function retained(root, _params, { api, notify, isCurrent }) {
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

export async function claims(root, _params, { api, notify, isCurrent }) {
  const page = listPage(root, {
    heading: [title('Topic claims'), viewerNote()],
    id: 'claims-table',
    fields: [['owner', 'Owner']],
    isCurrent,
    fetch: (query) => api.get('claims', query),
    render: (data) =>
      table(
        [
          { title: 'Tenant', value: (c) => c.tenant ?? '—' },
          { title: 'Owner', value: (c) => c.owner },
          { title: 'Pattern', value: (c) => c.pattern },
          { title: 'Expires', value: (c) => (c.expires === null ? 'never' : fmtTime(c.expires)) },
          { title: 'Quarantined', value: (c) => (c.quarantined ? 'yes' : 'no') },
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

export async function bridges(root, _params, { api, stream, isCurrent }) {
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
