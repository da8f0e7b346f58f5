// The hub's health from GET /metrics (the Prometheus text format, read
// with the operator's token): a few figures per area, and the busiest
// routes. The text is parsed here; the hub is asked again on Refresh.
import { api } from '../api.js';
import { h, page, section, table, button, attempt, show } from '../ui.js';

/** Prometheus text exposition to samples { name, labels, value }. */
export function parse(textBody) {
  const samples = [];
  for (const line of textBody.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([A-Za-z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = {};
    for (const l of (m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2].replace(/\\(.)/g, (_, c) => (c === 'n' ? '\n' : c));
    samples.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return samples;
}

/** The sum of a family's samples whose labels match `where`. */
export function sum(samples, name, where = {}) {
  return samples.filter((s) => s.name === name && Object.entries(where).every(([k, v]) => s.labels[k] === v)).reduce((a, s) => a + s.value, 0);
}

/** A family's samples summed by one label, as [value of the label, sum] pairs. */
function by(samples, name, label) {
  const out = new Map();
  for (const s of samples.filter((x) => x.name === name)) out.set(s.labels[label], (out.get(s.labels[label]) ?? 0) + s.value);
  return [...out];
}

const number = (n) => (Number.isInteger(n) ? n.toLocaleString('en') : n.toFixed(2));

export async function render(main) {
  const { status } = page(main, 'Health', 'The hub’s own figures from GET /metrics (since it started), as this replica counts them.');
  const cards = h('div', { class: 'cards' });
  const routes = h('div');
  const stamp = h('p', { class: 'hint' });

  function card(title, figures) {
    return h('div', { class: 'card', role: 'group', 'aria-label': title },
      h('h3', {}, title),
      h('dl', { class: 'facts' }, figures.flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, typeof v === 'number' ? number(v) : v)])));
  }

  async function load() {
    const body = await attempt(status, () => api('/metrics', { accept: 'text/plain' }));
    if (typeof body !== 'string') return;
    const s = parse(body);
    const requests = sum(s, 'hub_http_requests_total');
    const errors = sum(s, 'hub_http_requests_total', { status: '5xx' });
    const seconds = sum(s, 'hub_http_request_duration_seconds_sum');
    const timed = sum(s, 'hub_http_request_duration_seconds_count');
    const refusals = by(s, 'hub_gate_refusals_total', 'reason').filter(([, v]) => v > 0);
    cards.replaceChildren(
      card('Requests', [
        ['Answered', requests],
        ...['2xx', '4xx', '5xx'].map((c) => [c, sum(s, 'hub_http_requests_total', { status: c })]),
        ['5xx share', requests ? `${((100 * errors) / requests).toFixed(2)} %` : '—'],
        ['Mean time', timed ? `${((1000 * seconds) / timed).toFixed(1)} ms` : '—'],
      ]),
      card('Gate refusals', refusals.length ? refusals : [['Refused', 0]]),
      card('Audit appends', [['Total', sum(s, 'hub_audit_appends_total')], ...by(s, 'hub_audit_appends_total', 'path')]),
      card('Webhooks', [
        ['Backlog: outbox', sum(s, 'hub_webhook_backlog', { stage: 'outbox' })],
        ['Backlog: pending', sum(s, 'hub_webhook_backlog', { stage: 'pending' })],
        ...by(s, 'hub_webhook_attempts_total', 'outcome').map(([k, v]) => [`Attempts ${k}`, v]),
      ]),
      card('Robots', [
        ...by(s, 'hub_agents_connected', 'transport').map(([k, v]) => [`Agents on ${k}`, v]),
        ['Commands in flight', sum(s, 'hub_commands')],
        ['Sync batches', sum(s, 'hub_sync_batches_total')],
      ]),
      card('Database', by(s, 'hub_db_pool_max_connections', 'pool').map(([pool, max]) =>
        [`${pool} pool`, `${sum(s, 'hub_db_pool_connections', { pool, state: 'in_use' })} in use, ${sum(s, 'hub_db_pool_connections', { pool, state: 'idle' })} idle of ${max}`])),
    );
    const perRoute = new Map();
    for (const x of s.filter((x) => x.name === 'hub_http_requests_total')) {
      const key = `${x.labels.method} ${x.labels.route}`;
      const r = perRoute.get(key) ?? { route: key, count: 0, errors: 0, seconds: 0, timed: 0 };
      r.count += x.value;
      if (x.labels.status === '5xx') r.errors += x.value;
      perRoute.set(key, r);
    }
    for (const x of s.filter((x) => x.name === 'hub_http_request_duration_seconds_sum' || x.name === 'hub_http_request_duration_seconds_count')) {
      const r = perRoute.get(`${x.labels.method} ${x.labels.route}`);
      if (r) r[x.name.endsWith('_sum') ? 'seconds' : 'timed'] += x.value;
    }
    const busiest = [...perRoute.values()].sort((a, b) => b.count - a.count).slice(0, 10);
    routes.replaceChildren(table('Busiest routes', [
      ['Route', 'route'],
      ['Requests', (r) => number(r.count)],
      ['5xx', (r) => number(r.errors)],
      ['Mean time', (r) => (r.timed ? `${((1000 * r.seconds) / r.timed).toFixed(1)} ms` : '—')],
    ], busiest, 'No request yet.'));
    stamp.textContent = `Read at ${new Date().toISOString().replace('T', ' ').slice(0, 19)} UTC.`;
  }

  main.append(
    section('Figures', h('div', { class: 'actions' }, button('Refresh', async () => { await load(); show(status, 'Figures read again.'); }, { class: 'secondary' })), stamp, cards),
    section('Routes', routes),
  );
  await load();
}
