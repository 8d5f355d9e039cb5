// AMQP pages over RabbitMQ's management API: queues (get, purge, publish,
// moving dead letters back), exchanges, bindings, policies, connections.

import { api, listing, seg } from './api.js';
import { h, replace, panel, table, card, field, action, confirmButton, num, rate, bytes, headerLines, notice, unansweredNotice } from './ui.js';

const queueHref = q => `#/queues/${seg(q.vhost)}/${seg(q.name)}`;

export async function queuesPage(main) {
  const { data: queues, unanswered } = await listing('queues');
  replace(main, h('h1', {}, 'Queues'), unansweredNotice(unanswered), panel(null, table([
    { title: 'Virtual host', value: q => q.vhost },
    { title: 'Queue', value: q => h('a', { href: queueHref(q) }, q.name) },
    { title: 'Type', value: q => q.type },
    { title: 'Node', value: q => q.node || '–' },
    { title: 'State', value: q => h('span', { class: q.state === 'running' ? 'badge ok' : 'badge bad' }, q.state) },
    { title: 'Ready', value: q => num(q.messages_ready), num: true },
    { title: 'Unacked', value: q => num(q.messages_unacknowledged), num: true },
    { title: 'Consumers', value: q => num(q.consumers), num: true },
    { title: 'Incoming', value: q => rate(((q.message_stats || {}).publish_details || {}).rate || 0), num: true },
  ], queues, 'No queues yet.')));
}

export async function queuePage(main, vhost, name) {
  const path = `queues/${seg(vhost)}/${seg(name)}`;
  const head = h('div', { class: 'cards' });
  const draw = async () => {
    const q = await api('GET', path);
    replace(head, card('Ready', num(q.messages_ready), 'queue-ready'), card('Unacked', num(q.messages_unacknowledged), 'queue-unacked'),
      card('Consumers', num(q.consumers)), card('Type', q.type), card('State', q.state));
    return q;
  };
  const q = await draw();
  const args = Object.entries(q.arguments || {});
  replace(main, h('h1', {}, 'Queue ', name, h('span', { class: 'badge' }, vhost)), head,
    args.length ? panel('Arguments', table([{ title: 'Argument', value: a => a[0] }, { title: 'Value', value: a => JSON.stringify(a[1]) }], args)) : null,
    h('div', { class: 'split' }, panel('Get messages', getter(path, draw)), panel('Publish a message', publisher(vhost, '', name, draw))),
    h('div', { class: 'split' },
      panel('Dead letters', h('p', { class: 'muted' }, 'Publish each dead-lettered message again to the exchange it was first published to, with its original routing keys, and remove it from here once that publish is safe.'),
        replayer(path, draw)),
      panel('Purge', h('p', { class: 'muted' }, 'Delete every ready message of this queue.'), purger(path, draw))));
  const timer = setInterval(() => draw().catch(() => {}), 3000);
  return () => clearInterval(timer);
}

function getter(path, redraw) {
  const count = h('input', { id: 'get-count', type: 'number', min: 1, value: 1, style: 'width:80px' });
  const mode = h('select', { id: 'get-ackmode' },
    [['ack_requeue_true', 'Nack, requeue'], ['ack_requeue_false', 'Ack, remove'], ['reject_requeue_true', 'Reject, requeue'], ['reject_requeue_false', 'Reject, no requeue']]
      .map(([v, label]) => h('option', { value: v }, label)));
  const encoding = h('select', {}, h('option', { value: 'auto' }, 'text if possible'), h('option', { value: 'base64' }, 'base64'));
  const out = h('div', { id: 'get-result' });
  const form = h('form', { onsubmit: action(out, async () => {
    const msgs = await api('POST', path + '/get', { count: Number(count.value), ackmode: mode.value, encoding: encoding.value, truncate: 50000 });
    replace(out, msgs.length ? msgs.map(message) : notice('The queue is empty.'));
    await redraw();
  }) }, field('Messages', count), field('Then', mode), field('Payload as', encoding), h('button', { type: 'submit', id: 'get-go' }, 'Get'));
  return h('div', {}, form, out);
}

function message(m) {
  const props = { ...m.properties };
  return h('div', { class: 'msg' },
    h('div', { class: 'meta' }, `exchange “${m.exchange}”, routing key “${m.routing_key}”`, m.redelivered ? ', redelivered' : '', `, ${m.message_count} left`),
    h('pre', { class: 'payload' }, m.payload),
    Object.keys(props).length ? h('pre', { class: 'muted' }, JSON.stringify(props, null, 2)) : null);
}

function publisher(vhost, exchange, routingKey, redraw) {
  const key = h('input', { id: 'publish-key', value: routingKey });
  const payload = h('textarea', { id: 'publish-payload' });
  const headers = h('textarea', { id: 'publish-headers', placeholder: 'name=value, one a line', style: 'min-width:160px' });
  const persistent = h('input', { type: 'checkbox', checked: true });
  const out = h('div', { id: 'publish-result' });
  const form = h('form', { onsubmit: action(out, async () => {
    const hdrs = Object.fromEntries(headerLines(headers.value).map(x => [x.key, x.value]));
    const r = await api('POST', `exchanges/${seg(vhost)}/${seg(exchange || 'amq.default')}/publish`, {
      routing_key: key.value, payload: payload.value, payload_encoding: 'string',
      properties: { delivery_mode: persistent.checked ? 2 : 1, headers: hdrs },
    });
    await redraw();
    return r.routed ? 'Published and routed.' : 'Published, but no queue took it (unroutable).';
  }) }, field('Routing key', key), field('Payload', payload), field('Headers', headers),
  h('label', { class: 'row' }, h('span', {}, persistent, ' persistent')), h('button', { type: 'submit', id: 'publish-go' }, 'Publish'));
  return h('div', {}, form, out);
}

function replayer(path, redraw) {
  const out = h('div', { id: 'replay-result' });
  const button = h('button', { type: 'button', id: 'replay-go', onclick: action(out, async () => {
    const r = await api('POST', path + '/replay-dead-letters', {});
    await redraw();
    let text = `Moved ${r.moved} message(s) back.`;
    if (r.kept) text += ` ${r.kept} never died and stayed.`;
    if (r.failed) text += ` ${r.failed} stayed: ${r.reason}.`;
    return text;
  }) }, 'Move dead letters back');
  return h('div', {}, button, out);
}

function purger(path, redraw) {
  const out = h('div', { id: 'purge-result' });
  return h('div', {}, confirmButton('Purge', 'Delete every ready message?', action(out, async () => {
    await api('DELETE', path + '/contents');
    await redraw();
    return 'Purged.';
  })), out);
}

export async function exchangesPage(main) {
  const { data: exchanges, unanswered } = await listing('exchanges');
  const choice = h('select', { id: 'exchange-choice' }, exchanges.filter(x => !x.internal).map(x =>
    h('option', { value: JSON.stringify([x.vhost, x.name]) }, `${x.vhost} ${x.name || '(AMQP default)'}`)));
  const slot = h('div');
  const pick = () => { const [v, n] = JSON.parse(choice.value || '["/",""]'); replace(slot, publisher(v, n, '', async () => {})); };
  choice.addEventListener('change', pick);
  pick();
  replace(main, h('h1', {}, 'Exchanges'), unansweredNotice(unanswered), panel(null, table([
    { title: 'Virtual host', value: x => x.vhost },
    { title: 'Exchange', value: x => x.name || '(AMQP default)' },
    { title: 'Type', value: x => x.type },
    { title: 'Features', value: x => [x.durable ? 'durable' : 'transient', x.auto_delete ? 'auto-delete' : null, x.internal ? 'internal' : null].filter(Boolean).join(', ') },
    { title: 'Arguments', value: x => Object.keys(x.arguments || {}).length ? JSON.stringify(x.arguments) : '' },
  ], exchanges)), panel('Publish to an exchange', field('Exchange', choice), slot));
}

export async function bindingsPage(main) {
  const bindings = await api('GET', 'bindings');
  replace(main, h('h1', {}, 'Bindings'), panel(null, table([
    { title: 'Virtual host', value: b => b.vhost },
    { title: 'From exchange', value: b => b.source || '(AMQP default)' },
    { title: 'To', value: b => b.destination_type === 'queue' ? h('a', { href: queueHref({ vhost: b.vhost, name: b.destination }) }, b.destination) : b.destination },
    { title: 'Kind', value: b => b.destination_type },
    { title: 'Routing key', value: b => b.routing_key },
    { title: 'Arguments', value: b => Object.keys(b.arguments || {}).length ? JSON.stringify(b.arguments) : '' },
  ], bindings)));
}

export async function policiesPage(main) {
  const list = h('div');
  const draw = async () => {
    const policies = await api('GET', 'policies');
    replace(list, table([
      { title: 'Virtual host', value: p => p.vhost },
      { title: 'Name', value: p => p.name },
      { title: 'Pattern', value: p => h('code', {}, p.pattern) },
      { title: 'Applies to', value: p => p['apply-to'] },
      { title: 'Priority', value: p => p.priority, num: true },
      { title: 'Definition', value: p => h('pre', {}, JSON.stringify(p.definition)) },
      { title: '', value: p => confirmButton('Delete', 'Delete this policy?', action(list, async () => { await api('DELETE', `policies/${seg(p.vhost)}/${seg(p.name)}`); await draw(); })) },
    ], policies, 'No policies.'));
  };
  await draw();
  const vhost = h('input', { value: '/', style: 'width:80px' });
  const name = h('input', { id: 'policy-name' });
  const pattern = h('input', { id: 'policy-pattern', placeholder: '^work\\.' });
  const applyTo = h('select', {}, ['queues', 'classic_queues', 'quorum_queues', 'streams', 'exchanges', 'all'].map(v => h('option', { value: v }, v)));
  const priority = h('input', { type: 'number', value: 0, style: 'width:70px' });
  const definition = h('textarea', { id: 'policy-definition', placeholder: '{"message-ttl": 60000}' });
  const out = h('div');
  const form = h('form', { onsubmit: action(out, async () => {
    let def;
    try { def = JSON.parse(definition.value); } catch { throw new Error('The definition is not JSON.'); }
    await api('PUT', `policies/${seg(vhost.value)}/${seg(name.value)}`, { pattern: pattern.value, 'apply-to': applyTo.value, priority: Number(priority.value), definition: def });
    await draw();
    return `Policy ${name.value} set.`;
  }) }, field('Virtual host', vhost), field('Name', name), field('Pattern', pattern), field('Applies to', applyTo), field('Priority', priority),
  field('Definition', definition), h('button', { type: 'submit' }, 'Set policy'));
  replace(main, h('h1', {}, 'Policies'), panel(null, list), panel('Set a policy', form, out));
}

export async function connectionsPage(main) {
  const missing = h('div');
  const list = h('div');
  const out = h('div');
  const draw = async () => {
    const { data: conns, unanswered } = await listing('connections');
    replace(missing, unansweredNotice(unanswered));
    replace(list, table([
      { title: 'Connection', value: c => c.name },
      { title: 'Node', value: c => c.node },
      { title: 'Client', value: c => (c.client_properties || {}).connection_name || (c.client_properties || {}).product || '' },
      { title: 'User', value: c => c.user },
      { title: 'Virtual host', value: c => c.vhost },
      { title: 'State', value: c => c.state },
      { title: 'Channels', value: c => num(c.channels), num: true },
      { title: 'Received', value: c => bytes(c.recv_oct), num: true },
      { title: 'Sent', value: c => bytes(c.send_oct), num: true },
      { title: '', value: c => confirmButton('Close', 'Close this connection?', action(out, async () => {
        await api('DELETE', 'connections/' + seg(c.name));
        await draw();
        return `Closed ${c.name}.`;
      })) },
    ], conns, 'No AMQP connections.'));
  };
  await draw();
  replace(main, h('h1', {}, 'Connections'), missing, panel(null, list, out));
}
