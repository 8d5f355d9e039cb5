// The console's shell: login, navigation and the routes of its pages.

import { loggedIn, login, logout, user } from './api.js';
import { h, replace, notice } from './ui.js';
import { overviewPage } from './overview.js';
import { topicsPage, topicPage, groupsPage, groupPage } from './kafka.js';
import { queuesPage, queuePage, exchangesPage, bindingsPage, policiesPage, connectionsPage } from './amqp.js';

const sections = [
  ['#/', 'Overview'], ['#/topics', 'Topics'], ['#/groups', 'Consumer groups'], ['#/queues', 'Queues'],
  ['#/exchanges', 'Exchanges'], ['#/bindings', 'Bindings'], ['#/policies', 'Policies'], ['#/connections', 'Connections'],
];

// routes map a location hash to its page; captured groups are its
// (escaped) path segments.
const routes = [
  [/^#\/?$/, overviewPage],
  [/^#\/topics$/, topicsPage], [/^#\/topics\/([^/]+)$/, topicPage],
  [/^#\/groups$/, groupsPage], [/^#\/groups\/([^/]+)$/, groupPage],
  [/^#\/queues$/, queuesPage], [/^#\/queues\/([^/]+)\/([^/]+)$/, queuePage],
  [/^#\/exchanges$/, exchangesPage], [/^#\/bindings$/, bindingsPage],
  [/^#\/policies$/, policiesPage], [/^#\/connections$/, connectionsPage],
];

const main = document.getElementById('main');
let leave = null; // stops the shown page's timers

async function show() {
  if (leave) { leave(); leave = null; }
  if (!loggedIn()) return loginPage();
  drawChrome();
  const hash = location.hash || '#/';
  for (const [pattern, page] of routes) {
    const m = hash.match(pattern);
    if (!m) continue;
    try {
      leave = await page(main, ...m.slice(1).map(decodeURIComponent)) || null;
    } catch (err) {
      replace(main, notice(err.message, true));
    }
    return;
  }
  replace(main, notice('No page at ' + hash, true));
}

function drawChrome() {
  const hash = location.hash || '#/';
  replace(document.getElementById('nav'), sections.map(([href, label]) =>
    h('a', { href, class: (href === '#/' ? hash === '#/' || hash === '#' : hash.startsWith(href)) ? 'active' : '' }, label)));
  replace(document.getElementById('who'), user(), h('button', { type: 'button', id: 'logout', onclick: logout }, 'Log out'));
}

function loginPage() {
  replace(document.getElementById('nav'));
  replace(document.getElementById('who'));
  const name = h('input', { id: 'login-user', autocomplete: 'username', value: 'guest' });
  const password = h('input', { id: 'login-password', type: 'password', autocomplete: 'current-password' });
  const out = h('div');
  replace(main, h('section', { class: 'panel login' }, h('h1', {}, 'Log in to Wharf'),
    h('form', { onsubmit: async e => {
      e.preventDefault();
      try { await login(name.value, password.value); show(); } catch (err) { replace(out, notice(err.message, true)); }
    } }, h('label', {}, 'User', name), h('label', {}, 'Password', password), h('button', { type: 'submit', id: 'login-go' }, 'Log in')), out));
  password.focus();
}

window.addEventListener('hashchange', show);
window.addEventListener('wharf:logout', show);
show();
