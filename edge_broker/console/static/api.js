// The admin API v1 over fetch, and its Server-Sent Events stream. The session is the HttpOnly
// cookie the server set; the CSRF token it returned goes in X-CSRF-Token on every POST and DELETE.

export const session = { user: null, role: null, csrf: null };

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message || code || `HTTP ${status}`);
    this.status = status;
    this.code = code;
  }
}

/** Set by app.js: called when the server answers 401 (no or expired login). */
let onLoginNeeded = () => {};
export function whenLoginNeeded(callback) {
  onLoginNeeded = callback;
}

export async function request(method, path, { query, body } = {}) {
  let url = '/api/v1/' + path;
  if (query) {
    const params = new URLSearchParams();
    for (const [key, value] of Object.entries(query)) {
      if (value !== undefined && value !== null && value !== '') params.set(key, String(value));
    }
    const text = params.toString();
    if (text) url += '?' + text;
  }
  const headers = { Accept: 'application/json' };
  if (method !== 'GET' && session.csrf) headers['X-CSRF-Token'] = session.csrf;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let response;
  try {
    response = await fetch(url, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'same-origin',
      cache: 'no-store',
    });
  } catch (err) {
    throw new ApiError(0, 'network', `The broker did not answer (${err.message}).`);
  }
  let data = null;
  const type = response.headers.get('Content-Type') || '';
  if (type.includes('application/json')) {
    try {
      data = await response.json();
    } catch {
      data = null;
    }
  }
  if (!response.ok) {
    const code = data && data.error;
    if (response.status === 401 && path !== 'login') onLoginNeeded();
    let message = (data && data.message) || `${method} ${url}: HTTP ${response.status}`;
    if (response.status === 429) {
      const wait = response.headers.get('Retry-After');
      if (wait) message += ` Try again in ${wait} s.`;
    }
    throw new ApiError(response.status, code, message);
  }
  return data;
}

export const api = {
  get: (path, query) => request('GET', path, { query }),
  post: (path, body, query) => request('POST', path, { body, query }),
  del: (path, query) => request('DELETE', path, { query }),
};

/** `clients/<id>` with the id as one percent-encoded segment (`/` becomes %2F). */
export function segment(value) {
  return encodeURIComponent(String(value));
}

export async function login(user, password) {
  const data = await api.post('login', { user, password });
  Object.assign(session, { user: data.user, role: data.role, csrf: data.csrf });
  return data;
}

export async function whoAmI() {
  const data = await api.get('me');
  Object.assign(session, { user: data.user, role: data.role, csrf: data.csrf });
  return data;
}

export async function logout() {
  try {
    await api.post('logout', {});
  } finally {
    Object.assign(session, { user: null, role: null, csrf: null });
  }
}

export function canAct() {
  return session.role === 'operator';
}

/**
 * One EventSource for the whole console; views subscribe to event names while they are shown.
 * The browser reconnects by itself; when the stream closes for good the login is checked.
 */
export class EventStream {
  constructor() {
    this.source = null;
    this.listeners = new Map();
    this.connected = false;
  }

  start() {
    if (this.source) return;
    const source = new EventSource('/api/v1/events');
    this.source = source;
    for (const name of ['counters', 'denial', 'client']) {
      source.addEventListener(name, (event) => {
        let data;
        try {
          data = JSON.parse(event.data);
        } catch {
          return;
        }
        this.emit(name, data);
      });
    }
    source.addEventListener('open', () => {
      this.connected = true;
      this.emit('status', { connected: true });
    });
    source.addEventListener('error', () => {
      this.connected = false;
      this.emit('status', { connected: false });
      if (source.readyState === EventSource.CLOSED) {
        this.source = null;
        // a 401 closes the stream for good: whoAmI sends the user to the login page
        whoAmI().then(
          () => setTimeout(() => this.start(), 3000),
          () => {},
        );
      }
    });
  }

  stop() {
    if (this.source) this.source.close();
    this.source = null;
    this.connected = false;
  }

  on(name, callback) {
    if (!this.listeners.has(name)) this.listeners.set(name, new Set());
    this.listeners.get(name).add(callback);
    return () => this.listeners.get(name).delete(callback);
  }

  emit(name, data) {
    for (const callback of this.listeners.get(name) || []) {
      try {
        callback(data);
      } catch (err) {
        console.error(err);
      }
    }
  }
}
