// DOM building, formatting, tables, bars and the small SVG charts. Nothing
// is ever put in the page as HTML: text stays text.

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k in el && k !== 'list') el[k] = v;
    else el.setAttribute(k, v === true ? '' : v);
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
}

export function replace(el, ...children) { el.replaceChildren(); append(el, children); }

const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
export function bytes(n) {
  if (n === undefined || n === null || n < 0) return '–';
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(n < 10 ? 1 : 0) : n) + ' ' + units[i];
}
export function num(n) { return n === undefined || n === null ? '–' : Number(n).toLocaleString('en-US'); }
export function rate(n) { return n === undefined || n === null ? '–' : (n < 10 ? n.toFixed(1) : Math.round(n).toLocaleString('en-US')) + '/s'; }
export function duration(ms) {
  if (!ms) return '0s';
  const s = Math.floor(ms / 1000);
  if (s < 60) return s + 's';
  if (s < 3600) return Math.floor(s / 60) + 'm' + String(s % 60).padStart(2, '0') + 's';
  if (s < 86400) return Math.floor(s / 3600) + 'h' + String(Math.floor(s / 60) % 60).padStart(2, '0') + 'm';
  return Math.floor(s / 86400) + 'd' + Math.floor(s / 3600) % 24 + 'h';
}
export function time(ms) { return ms ? new Date(ms).toLocaleString() : '–'; }

export function card(label, value, id) {
  return h('div', { class: 'card' }, h('div', { class: 'label' }, label), h('div', { class: 'value', id }, value));
}

export function panel(title, ...children) { return h('section', { class: 'panel' }, title ? h('h2', {}, title) : null, ...children); }

// table draws rows under columns: {title, value(row), num, id}.
export function table(columns, rows, empty = 'Nothing here yet.') {
  if (!rows.length) return h('p', { class: 'muted' }, empty);
  return h('table', {},
    h('thead', {}, h('tr', {}, columns.map(c => h('th', { class: c.num ? 'num' : '' }, c.title)))),
    h('tbody', {}, rows.map(r => h('tr', {}, columns.map(c => h('td', { class: c.num ? 'num' : '' }, c.value(r)))))));
}

// bar is a horizontal bar of value against max (green when zero).
export function bar(value, max) {
  const pct = max > 0 ? Math.max(2, Math.round(100 * value / max)) : 0;
  return h('div', { class: value > 0 ? 'bar' : 'bar ok', title: num(value) }, h('span', { style: `width:${value > 0 ? pct : 100}%` }));
}

// sparkline is a small area chart of points (numbers), newest last.
export function sparkline(points) {
  const ns = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(ns, 'svg');
  const w = 100, hgt = 30;
  svg.setAttribute('viewBox', `0 0 ${w} ${hgt}`);
  svg.setAttribute('preserveAspectRatio', 'none');
  if (points.length < 2) return svg;
  const max = Math.max(...points, 1e-9);
  const xy = points.map((p, i) => `${(i * w / (points.length - 1)).toFixed(2)},${(hgt - 1 - p / max * (hgt - 2)).toFixed(2)}`);
  const area = document.createElementNS(ns, 'polygon');
  area.setAttribute('points', `0,${hgt} ${xy.join(' ')} ${w},${hgt}`);
  const line = document.createElementNS(ns, 'polyline');
  line.setAttribute('points', xy.join(' '));
  svg.append(area, line);
  return svg;
}

export function chart(title, points, format) {
  const now = points.length ? points[points.length - 1] : null;
  return h('div', { class: 'chart' },
    h('div', { class: 'head' }, h('span', { class: 'muted' }, title), h('span', { class: 'now' }, now === null ? '–' : format(now))),
    sparkline(points));
}

export function field(label, input) { return h('label', {}, label, input); }

// unansweredNotice tells, above a listing, which cluster nodes did not
// answer (nodes: the Wharf-Unanswered-Nodes header), nothing if all did.
export function unansweredNotice(nodes) {
  if (!nodes) return null;
  return h('div', { class: 'notice error', role: 'status', id: 'unanswered' },
    `No answer in time from ${nodes}: what is there is missing from this page.`);
}

export function notice(text, error) { return h('div', { class: error ? 'notice error' : 'notice', role: 'status' }, text); }

// action runs fn on a click, showing its outcome (or error) in out.
export function action(out, fn) {
  return async e => {
    e && e.preventDefault && e.preventDefault();
    try {
      const text = await fn();
      if (text !== undefined) replace(out, notice(text));
    } catch (err) {
      replace(out, notice(err.message, true));
    }
  };
}

// confirmButton asks once more, inline, before running fn.
export function confirmButton(label, question, fn) {
  const box = h('span', { class: 'row' });
  const start = h('button', { class: 'danger', type: 'button', onclick: () => {
    replace(box, h('span', {}, question), h('button', { class: 'danger', type: 'button', 'data-confirm': label, onclick: async () => { await fn(); replace(box, start); } }, 'Yes, ' + label.toLowerCase()),
      h('button', { class: 'secondary', type: 'button', onclick: () => replace(box, start) }, 'Cancel'));
  } }, label);
  box.append(start);
  return box;
}

// headerLines reads "key=value" lines into [{key, value}].
export function headerLines(text) {
  return text.split('\n').map(l => l.trim()).filter(Boolean).map(l => {
    const i = l.indexOf('=');
    return i < 0 ? { key: l, value: '' } : { key: l.slice(0, i), value: l.slice(i + 1) };
  });
}
