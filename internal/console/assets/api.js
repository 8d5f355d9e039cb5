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
  const headers = { Authorization: 'Basic ' + sessionStorage.getItem(key) };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const r = await fetch('/api/' + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (r.status === 401) { logout(); throw new Error('Logged out.'); }
  if (r.status === 204) return null;
  const text = await r.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!r.ok) {
    const reason = data && (Array.isArray(data.reason) ? data.reason.join(' ') : data.reason);
    throw new Error(reason || `${method} ${path}: ${r.status}`);
  }
  return data;
}

// seg escapes one path segment: the vhost "/" is "%2F", as in RabbitMQ.
export const seg = s => encodeURIComponent(s);
