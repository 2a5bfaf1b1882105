// One function per page: view(root, params, ctx) fills `root` and returns a cleanup function
// (unsubscribe, stop timers) called when the user leaves the page.

import { clientDetail, clients } from './clients.js';
import { dashboard } from './dashboard.js';
import { denials } from './denials.js';
import { bridges, claims, retained, sessions, subscriptions } from './lists.js';
import { policy } from './policy.js';

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
