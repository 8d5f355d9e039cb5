// The overview: counts and live rates of both protocols, polled every two
// seconds. The history lives as long as the tab, so coming back to the
// page shows the last minutes.

import { api, listing } from './api.js';
import { h, replace, card, chart, bytes, num, rate, unansweredNotice } from './ui.js';

const historyLength = 90; // points: three minutes at one every two seconds
const series = {};
let previous = null; // the last Kafka totals, to turn into rates

function push(name, value) {
  const s = series[name] || (series[name] = []);
  s.push(value);
  if (s.length > historyLength) s.shift();
  return s;
}

async function sample() {
  const [{ data: overview, unanswered }, topics, groups] = await Promise.all([listing('overview'), api('GET', 'kafka/topics'), api('GET', 'kafka/groups')]);
  const totals = { at: Date.now(), records: 0, bytesIn: 0, bytesOut: 0, partitions: 0, topics: 0 };
  for (const t of topics) {
    totals.records += t.records; totals.bytesIn += t.bytes_in; totals.bytesOut += t.bytes_out;
    if (!t.internal) { totals.topics++; totals.partitions += t.partitions; }
  }
  if (previous) {
    const secs = Math.max((totals.at - previous.at) / 1000, 0.001);
    push('records', Math.max(0, (totals.records - previous.records) / secs));
    push('bytesIn', Math.max(0, (totals.bytesIn - previous.bytesIn) / secs));
    push('bytesOut', Math.max(0, (totals.bytesOut - previous.bytesOut) / secs));
  }
  previous = totals;
  const stats = overview.message_stats || {};
  push('publish', (stats.publish_details || {}).rate || 0);
  push('deliver', (stats.deliver_get_details || {}).rate || 0);
  const q = overview.queue_totals || {};
  push('queued', q.messages || 0);
  push('lag', groups.reduce((sum, g) => sum + g.lag, 0));
  return { overview, unanswered, totals, groups };
}

export async function overviewPage(main) {
  const missing = h('div');
  const counts = h('div', { class: 'cards' });
  const charts = h('div', { class: 'charts' });
  replace(main, h('h1', {}, 'Overview'), missing, counts, charts);
  const draw = ({ overview, unanswered, totals, groups }) => {
    replace(missing, unansweredNotice(unanswered));
    const o = overview.object_totals || {};
    const q = overview.queue_totals || {};
    replace(counts,
      card('Topics', num(totals.topics), 'count-topics'), card('Partitions', num(totals.partitions)),
      card('Consumer groups', num(groups.length)), card('Queues', num(o.queues), 'count-queues'),
      card('Ready', num(q.messages_ready)), card('Unacked', num(q.messages_unacknowledged)),
      card('Connections', num(o.connections)), card('Channels', num(o.channels)), card('Consumers', num(o.consumers)));
    replace(charts,
      chart('Kafka records in', series.records || [], rate), chart('Kafka bytes in', series.bytesIn || [], v => bytes(v) + '/s'),
      chart('Kafka bytes out', series.bytesOut || [], v => bytes(v) + '/s'), chart('Consumer lag (records)', series.lag || [], num),
      chart('AMQP publish', series.publish || [], rate), chart('AMQP deliver', series.deliver || [], rate),
      chart('Queued messages', series.queued || [], num));
  };
  draw(await sample());
  const timer = setInterval(async () => { try { draw(await sample()); } catch { /* the next tick retries */ } }, 2000);
  return () => clearInterval(timer);
}
