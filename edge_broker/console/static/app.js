// The console shell: login, navigation by URL hash, the live event stream and the dashboard's
// bounded history. The pages themselves are in views.js.

import { api, EventStream, login, logout, session, whenLoginNeeded, whoAmI } from './api.js';
import { History } from './charts.js';
import { clear, h } from './dom.js';
import { VIEWS } from './views.js';

const stream = new EventStream();
const viewRoot = document.getElementById('view');
const nav = document.getElementById('nav');
const who = document.getElementById('who');
const notice = document.getElementById('notice');

// samples of the `counters` event (one every 2 s): 150 of them is the last five minutes
const history = {
  inRate: new History(),
  outRate: new History(),
  clients: new History(),
  backlog: new History(),
  rss: new History(),
  budget: new History(),
  latest: null,
};

let noticeTimer = null;
function notify(text, kind = 'info') {
  notice.textContent = text;
  notice.className = `notice ${kind}`;
  notice.hidden = false;
  clearTimeout(noticeTimer);
  noticeTimer = setTimeout(() => {
    notice.hidden = true;
  }, kind === 'error' ? 10000 : 5000);
}

/** The bridge backlog as the counters event gives it: one number, or per bridge. */
function backlogOf(counters) {
  const value = counters.bridge_backlog ?? counters.bridges?.backlog ?? counters.backlog;
  if (typeof value === 'number') return value;
  if (value && typeof value === 'object') {
    return Object.values(value).reduce((sum, v) => sum + (Number(v) || 0), 0);
  }
  return 0;
}

stream.on('counters', (counters) => {
  history.latest = counters;
  history.inRate.push(counters.rates?.in_per_s);
  history.outRate.push(counters.rates?.out_per_s);
  history.clients.push(counters.connections);
  history.backlog.push(backlogOf(counters));
  history.rss.push(counters.memory?.rss_bytes);
  history.budget.push(counters.memory?.budget_bytes);
});

stream.on('status', ({ connected }) => {
  document.body.classList.toggle('stream-down', !connected);
});

let cleanup = null;
let renderToken = 0;

function parseHash() {
  const parts = location.hash.replace(/^#\/?/, '').split('/').filter((p) => p !== '');
  try {
    return parts.map(decodeURIComponent);
  } catch {
    return [];
  }
}

function showShell(loggedIn) {
  nav.hidden = !loggedIn;
  clear(who);
  if (!loggedIn) return;
  who.append(
    h('span', { class: 'user' }, session.user),
    ' ',
    h('span', { class: ['role', session.role] }, session.role),
    ' ',
    h(
      'button',
      {
        type: 'button',
        class: 'link',
        id: 'logout',
        onclick: async () => {
          await logout().catch(() => {});
          stream.stop();
          showLogin();
        },
      },
      'Log out',
    ),
  );
}

async function route() {
  if (!session.csrf) return;
  const token = ++renderToken;
  if (cleanup) {
    cleanup();
    cleanup = null;
  }
  const [name = 'dashboard', ...params] = parseHash();
  const view = VIEWS[name] || VIEWS.dashboard;
  for (const a of nav.querySelectorAll('a')) {
    if (a.dataset.view === name) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  const root = clear(viewRoot);
  root.dataset.view = name;
  root.setAttribute('aria-busy', 'true'); // until the page has its first data
  try {
    const done = await view(root, params, { api, stream, history, notify, isCurrent: () => token === renderToken });
    if (token === renderToken) cleanup = done || null;
    else if (done) done();
  } catch (err) {
    if (token !== renderToken) return;
    if (err.status === 401) return;
    root.append(h('p', { class: 'error' }, err.message));
  } finally {
    if (token === renderToken) root.removeAttribute('aria-busy');
  }
}

function showLogin(message) {
  if (cleanup) {
    cleanup();
    cleanup = null;
  }
  Object.assign(session, { user: null, role: null, csrf: null });
  showShell(false);
  const root = clear(viewRoot);
  root.dataset.view = 'login';
  const user = h('input', { name: 'user', id: 'login-user', autocomplete: 'username', required: true });
  const password = h('input', {
    name: 'password',
    id: 'login-password',
    type: 'password',
    autocomplete: 'current-password',
    required: true,
  });
  const error = h('p', { class: 'error', role: 'alert' }, message || '');
  const form = h(
    'form',
    { class: 'login card', id: 'login-form' },
    h('h2', null, 'Log in'),
    h('label', null, 'User', user),
    h('label', null, 'Password', password),
    h('button', { type: 'submit' }, 'Log in'),
    error,
    h(
      'p',
      { class: 'muted' },
      'Admin users are managed with "edge-broker admin add". On a fresh gateway, open the ' +
        'one-time login link the broker printed when it started.',
    ),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    error.textContent = '';
    try {
      await login(user.value, password.value);
      started();
    } catch (err) {
      error.textContent = err.status === 401 ? 'Wrong user or password.' : err.message;
    }
  });
  root.append(form);
  user.focus();
}

function started() {
  showShell(true);
  stream.start();
  route();
}

whenLoginNeeded(() => {
  stream.stop();
  if (session.csrf) showLogin('Your login has ended; log in again.');
});

window.addEventListener('hashchange', route);

whoAmI().then(started, (err) => {
  if (err.status === 401) showLogin();
  else showLogin(err.message);
});

export { notify };
