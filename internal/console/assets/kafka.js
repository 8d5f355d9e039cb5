// Kafka pages: topics (partitions, configs, message browser, produce) and
// consumer groups (members, lag per partition, offset resets with a
// preview), over Wharf's /api/kafka/.

import { api, seg } from './api.js';
import { h, replace, panel, table, card, bar, field, action, bytes, num, duration, time, headerLines } from './ui.js';

export async function topicsPage(main) {
  const list = h('div');
  const showInternal = h('input', { type: 'checkbox', id: 'show-internal' });
  const draw = async () => {
    const topics = (await api('GET', 'kafka/topics')).filter(t => showInternal.checked || !t.internal);
    const largest = Math.max(0, ...topics.map(t => t.size));
    replace(list, table([
      { title: 'Topic', value: t => h('span', {}, h('a', { href: '#/topics/' + seg(t.name) }, t.name), t.internal ? h('span', { class: 'badge' }, 'internal') : null,
        t.offline_partitions ? h('span', { class: 'badge bad' }, t.offline_partitions + ' offline') : null) },
      { title: 'Partitions', value: t => num(t.partitions), num: true },
      { title: 'Messages', value: t => num(t.messages), num: true },
      { title: 'Size', value: t => bytes(t.size), num: true },
      { title: '', value: t => h('div', { class: 'bar ok' }, h('span', { style: `width:${largest ? Math.max(1, 100 * t.size / largest) : 0}%` })) },
      { title: 'Bytes in', value: t => bytes(t.bytes_in), num: true },
      { title: 'Bytes out', value: t => bytes(t.bytes_out), num: true },
    ], topics, 'No topics yet.'));
  };
  showInternal.addEventListener('change', draw);
  replace(main, h('h1', {}, 'Topics'), panel(null, h('label', { class: 'row' }, h('span', {}, showInternal, ' show internal topics')), list));
  await draw();
}

export async function topicPage(main, name) {
  const t = await api('GET', 'kafka/topics/' + seg(name));
  const showDefaults = h('input', { type: 'checkbox' });
  const configs = h('div');
  const drawConfigs = () => replace(configs, table([
    { title: 'Config', value: c => c.default ? c.name : h('strong', {}, c.name) },
    { title: 'Value', value: c => c.sensitive ? '••••' : c.value },
    { title: 'Source', value: c => c.default ? 'default' : 'topic' },
  ], t.configs.filter(c => showDefaults.checked || !c.default), 'Every config has its default value.'));
  showDefaults.addEventListener('change', drawConfigs);
  drawConfigs();
  replace(main,
    h('h1', {}, 'Topic ', h('span', { id: 'topic-name' }, t.name)),
    h('div', { class: 'cards' }, card('Partitions', num(t.partitions)), card('Messages', num(t.messages)), card('Size', bytes(t.size)),
      card('Bytes in', bytes(t.bytes_in)), card('Bytes out', bytes(t.bytes_out))),
    panel('Messages', browser(t)),
    h('div', { class: 'split' },
      panel('Partitions', table([
        { title: 'Partition', value: p => p.partition, num: true },
        { title: 'Start offset', value: p => num(p.start_offset), num: true },
        { title: 'End offset', value: p => num(p.end_offset), num: true },
        { title: 'Size', value: p => bytes(p.size), num: true },
        { title: 'State', value: p => p.offline ? h('span', { class: 'badge bad', title: p.offline }, 'offline') : h('span', { class: 'badge ok' }, 'online') },
      ], t.partition_list)),
      panel('Configs', h('label', { class: 'row' }, h('span', {}, showDefaults, ' show defaults')), configs)),
    t.internal ? null : panel('Produce a record', producer(t)));
}

function partitionSelect(t, id, withAuto) {
  const s = h('select', { id });
  if (withAuto) s.append(h('option', { value: '-1' }, 'by key'));
  for (const p of t.partition_list) s.append(h('option', { value: p.partition }, String(p.partition)));
  return s;
}

// browser reads pages of records from an offset or a time, filtered by
// key or header, shown as text, JSON or hex.
function browser(t) {
  const partition = partitionSelect(t, 'browse-partition');
  const from = h('select', { id: 'browse-from' }, h('option', { value: 'start' }, 'the beginning'), h('option', { value: 'offset' }, 'an offset'), h('option', { value: 'time' }, 'a time'));
  const offset = h('input', { id: 'browse-offset', type: 'number', min: 0, value: 0, style: 'width:110px' });
  const at = h('input', { id: 'browse-time', type: 'datetime-local', step: 1 });
  const key = h('input', { id: 'browse-key', placeholder: 'contains…' });
  const header = h('input', { id: 'browse-header', placeholder: 'name', style: 'width:110px' });
  const headerValue = h('input', { id: 'browse-header-value', placeholder: 'value contains…', style: 'width:130px' });
  const format = h('select', { id: 'browse-format' }, ['text', 'json', 'hex'].map(f => h('option', { value: f }, f)));
  const limit = h('input', { id: 'browse-limit', type: 'number', min: 1, max: 500, value: 50, style: 'width:80px' });
  const out = h('div', { id: 'browse-result' });
  let next = null;
  const read = async startAt => {
    const q = new URLSearchParams({ limit: limit.value, format: format.value });
    if (startAt !== undefined) q.set('offset', startAt);
    else if (from.value === 'offset') q.set('offset', offset.value || 0);
    else if (from.value === 'time' && at.value) q.set('timestamp', new Date(at.value).getTime());
    for (const [k, input] of [['key', key], ['header', header], ['header_value', headerValue]]) if (input.value) q.set(k, input.value);
    const page = await api('GET', `kafka/topics/${seg(t.name)}/partitions/${partition.value}/records?${q}`);
    next = page.next_offset;
    replace(out,
      h('p', { class: 'muted' }, `Offsets ${num(page.start_offset)} to ${num(page.end_offset)}; ${page.records.length} shown of ${page.scanned} read.`),
      table([
        { title: 'Offset', value: r => r.offset, num: true },
        { title: 'Time', value: r => time(r.timestamp) },
        { title: 'Key', value: r => rendered(r.key) },
        { title: 'Value', value: r => rendered(r.value) },
        { title: 'Headers', value: r => r.headers.map(hd => h('div', {}, h('strong', {}, hd.key), ': ', hd.value ? hd.value.data : 'null')) },
      ], page.records, 'No records match.'),
      next < page.end_offset ? h('button', { class: 'secondary', id: 'browse-next', type: 'button', onclick: action(out, () => read(next)) }, 'Next page') : null);
  };
  const form = h('form', { onsubmit: action(out, () => read()) },
    field('Partition', partition), field('From', from), field('Offset', offset), field('Time', at), field('Key', key),
    field('Header', header), field('Header value', headerValue), field('Show as', format), field('Limit', limit),
    h('button', { type: 'submit', id: 'browse-read' }, 'Read'));
  return h('div', {}, form, out);
}

function rendered(r) {
  if (!r) return h('span', { class: 'muted' }, 'null');
  return h('pre', { title: `${r.format}, ${bytes(r.size)}` }, r.data + (r.truncated ? ' …' : ''));
}

function producer(t) {
  const partition = partitionSelect(t, 'produce-partition', true);
  const key = h('input', { id: 'produce-key', placeholder: 'none' });
  const value = h('textarea', { id: 'produce-value' });
  const headers = h('textarea', { id: 'produce-headers', placeholder: 'name=value, one a line', style: 'min-width:200px' });
  const out = h('div', { id: 'produce-result' });
  const form = h('form', { onsubmit: action(out, async () => {
    const body = { partition: Number(partition.value), value: value.value, headers: headerLines(headers.value) };
    if (key.value) body.key = key.value;
    const r = await api('POST', `kafka/topics/${seg(t.name)}/records`, body);
    return `Produced to partition ${r.partition} at offset ${r.offset}.`;
  }) }, field('Partition', partition), field('Key', key), field('Value', value), field('Headers', headers), h('button', { type: 'submit', id: 'produce-send' }, 'Produce'));
  return h('div', {}, form, out);
}

export async function groupsPage(main) {
  const groups = await api('GET', 'kafka/groups');
  const maxLag = Math.max(0, ...groups.map(g => g.lag));
  replace(main, h('h1', {}, 'Consumer groups'), panel(null, table([
    { title: 'Group', value: g => h('a', { href: '#/groups/' + seg(g.group) }, g.group) },
    { title: 'Type', value: g => g.type },
    { title: 'State', value: g => g.state },
    { title: 'Members', value: g => num(g.members), num: true },
    { title: 'Lag', value: g => num(g.lag), num: true },
    { title: '', value: g => bar(g.lag, maxLag) },
  ], groups, 'No consumer groups yet.')));
}

export async function groupPage(main, name) {
  const lagPanel = h('div', { id: 'group-lag' });
  const head = h('div', { class: 'cards' });
  const members = h('div');
  const draw = async () => {
    const g = await api('GET', 'kafka/groups/' + seg(name));
    replace(head, card('State', g.state, 'group-state'), card('Members', num(g.members), 'group-members'), card('Lag', num(g.lag), 'group-total-lag'), card('Type', g.type || '–'));
    replace(members, table([
      { title: 'Member', value: m => m.member_id },
      { title: 'Client', value: m => m.client_id },
      { title: 'Host', value: m => m.client_host },
      { title: 'Assigned', value: m => m.assignment.map(a => `${a.topic}: ${a.partitions.join(', ')}`).join('; ') },
    ], g.member_list, 'No live members: the group\'s offsets can be reset.'));
    const maxLag = Math.max(0, ...g.partitions.map(p => p.lag));
    replace(lagPanel, table([
      { title: 'Topic', value: p => p.topic },
      { title: 'Partition', value: p => p.partition, num: true },
      { title: 'Committed', value: p => num(p.committed), num: true },
      { title: 'End', value: p => num(p.end_offset), num: true },
      { title: 'Lag', value: p => h('span', { 'data-lag': `${p.topic}/${p.partition}` }, num(p.lag)), num: true },
      { title: '', value: p => bar(p.lag, maxLag) },
      { title: 'Lag in time', value: p => p.error ? h('span', { class: 'badge bad' }, p.error) : duration(p.lag_ms) },
    ], g.partitions, 'The group has committed no offsets.'));
    return g;
  };
  const g = await draw();
  replace(main, h('h1', {}, 'Consumer group ', g.group), head,
    panel('Lag per partition', lagPanel), panel('Members', members), panel('Reset offsets', await resetForm(name, g, draw)));
  const timer = setInterval(() => draw().catch(() => {}), 3000);
  return () => clearInterval(timer);
}

const modeHints = {
  'to-earliest': '', 'to-latest': '', 'to-offset': 'offset', 'shift-by': '-100',
  'to-datetime': '2026-10-20T09:00:00.000', 'by-duration': 'PT1H',
};

// resetForm previews a reset (the plan, nothing changed) and then applies
// exactly what was previewed.
async function resetForm(name, g, redraw) {
  const topics = (await api('GET', 'kafka/topics')).filter(t => !t.internal).map(t => t.name);
  const mode = h('select', { id: 'reset-mode' }, Object.keys(modeHints).map(m => h('option', { value: m }, m)));
  const value = h('input', { id: 'reset-value', disabled: true });
  mode.addEventListener('change', () => { value.disabled = !modeHints[mode.value]; value.placeholder = modeHints[mode.value]; });
  const topic = h('select', { id: 'reset-topic' }, h('option', { value: '' }, 'every topic it committed'), topics.map(t => h('option', { value: t }, t)));
  const partitions = h('input', { id: 'reset-partitions', placeholder: 'all, or 0,1,2', style: 'width:120px' });
  const plan = h('div', { id: 'reset-plan' });
  const out = h('div', { id: 'reset-result' });
  const request = execute => {
    const body = { mode: mode.value, value: value.value, execute };
    if (topic.value) {
      const ps = partitions.value.split(',').map(s => s.trim()).filter(Boolean).map(Number);
      body.topics = [{ topic: topic.value, partitions: ps }];
    } else body.all_topics = true;
    return body;
  };
  const preview = action(out, async () => {
    const body = request(false);
    const r = await api('POST', `kafka/groups/${seg(name)}/reset-offsets`, body);
    const failed = r.plan.some(s => s.error);
    replace(plan, table([
      { title: 'Topic', value: s => s.topic },
      { title: 'Partition', value: s => s.partition, num: true },
      { title: 'Current', value: s => s.current_offset < 0 ? '–' : num(s.current_offset), num: true },
      { title: 'New', value: s => s.error ? h('span', { class: 'badge bad' }, s.error) : h('strong', { 'data-new-offset': `${s.topic}/${s.partition}` }, num(s.new_offset)), num: true },
    ], r.plan, 'Nothing to reset.'),
    h('div', { class: 'row', style: 'margin-top:10px' },
      h('button', { class: 'danger', type: 'button', id: 'reset-apply', disabled: failed || !r.plan.length, onclick: action(out, async () => {
        await api('POST', `kafka/groups/${seg(name)}/reset-offsets`, { ...body, execute: true });
        replace(plan);
        await redraw();
        return `Committed new offsets for ${r.plan.length} partition(s).`;
      }) }, 'Apply this plan'),
      h('span', { class: 'muted' }, 'Nothing has changed yet.')));
    replace(out);
  });
  return h('div', {},
    h('form', { onsubmit: preview }, field('Mode', mode), field('Value', value), field('Topic', topic), field('Partitions', partitions),
      h('button', { type: 'submit', id: 'reset-preview' }, 'Preview')),
    h('p', { class: 'muted' }, 'As wharf groups reset-offsets: refused while the group has live members.'), plan, out);
}
