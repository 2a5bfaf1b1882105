// The dashboard: the overview's facts and four charts fed by the event stream.

import { lineChart } from './charts.js';
import { facts, fmtBytes, fmtDuration, fmtNumber, h } from './dom.js';
import { title } from './widgets.js';

// ---------------------------------------------------------------- dashboard

export async function dashboard(root, _params, { api, stream, history }) {
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
