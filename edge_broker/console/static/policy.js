// The policy page: the bundle in force, reload, "would this client be allowed?", the config.

import { facts, h } from './dom.js';
import { operatorAction, title } from './widgets.js';

// ---------------------------------------------------------------- policy

export async function policy(root, _params, { api, notify }) {
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
  const tenant = h('input', { name: 'tenant', id: 'explain-tenant', placeholder: 'tenant (optional)' });
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
    h('div', { class: 'sentence' }, 'Would the client with', kind, who, 'and client id', clientId, 'in', tenant, 'be allowed to', action, topic, '?'),
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
        ...(tenant.value.trim() ? { tenant: tenant.value.trim() } : {}),
        action: action.value,
        topic: topic.value,
      });
      result.replaceChildren(
        h('p', { class: answer.allowed ? 'verdict allowed' : 'verdict denied' }, answer.allowed ? 'Allowed' : 'Denied'),
        facts([
          ['Gate', answer.gate ?? '—'],
          ['Reason', answer.reason ?? '—'],
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
