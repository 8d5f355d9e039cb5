// The management API, called with the logged-in user's basic auth. The
// credentials stay in this tab's sessionStorage; a 401 logs out.

const key = 'wharf.auth';

export function loggedIn() { return sessionStorage.getItem(key) !== null; }

export function user() {
  const a = sessionStorage.getItem(key);
  return a ? atob(a).split(':')[0] : '';
}

export function logout() {
  sessionStorage.removeItem(key);
  window.dispatchEvent(new Event('wharf:logout'));
}

// login checks the credentials against /api/whoami and keeps them.
export async function login(name, password) {
  const auth = btoa(name + ':' + password);
  const r = await fetch('/api/whoami', { headers: { Authorization: 'Basic ' + auth } });
  if (!r.ok) throw new Error(r.status === 401 ? 'Wrong user name or password.' : 'Login failed: ' + r.status);
  sessionStorage.setItem(key, auth);
}

// api sends one request below /api/ and returns its JSON (null for 204).
export async function api(method, path, body) {
  return (await call(method, path, body)).data;
}

// listing GETs path, a listing or count of the whole cluster's objects,
// and returns its JSON with the nodes that did not answer in time (their
// objects are missing from it): the Wharf-Unanswered-Nodes header, '' if
// every node answered.
export async function listing(path) {
  const { data, headers } = await call('GET', path);
  return { data, unanswered: headers.get('Wharf-Unanswered-Nodes') || '' };
}

async function call(method, path, body) {
  const headers = { Authorization: 'Basic ' + sessionStorage.getItem(key) };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const r = await fetch('/api/' + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (r.status === 401) { logout(); throw new Error('Logged out.'); }
  if (r.status === 204) return { data: null, headers: r.headers };
  const text = await r.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!r.ok) {
    const reason = data && (Array.isArray(data.reason) ? data.reason.join(' ') : data.reason);
    throw new Error(reason || `${method} ${path}: ${r.status}`);
  }
  return { data, headers: r.headers };
}

// seg escapes one path segment: the vhost "/" is "%2F", as in RabbitMQ.
export const seg = s => encodeURIComponent(s);
