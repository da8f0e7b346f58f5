// The signed-in admin's landing page: who the hub says the caller is
// (GET /api/me), the tenant, and a count of what it holds.
import { api, data, session } from '../api.js';
import { h, page, section, attempt, text } from '../ui.js';

const COUNTS = [
  ['Applications', '/api/applications', 'keys'],
  ['Webhook endpoints', '/api/webhooks/endpoints', 'webhooks'],
  ['Feature flags', '/api/feature-flags', 'flags'],
  ['Assets', '/api/assets', 'robots'],
  ['Audit entries', '/api/audit/entries', 'audit'],
];

export async function render(main) {
  const { status } = page(main, 'Overview');
  const me = await attempt(status, () => data('/api/me'));
  if (me) {
    main.append(section('Signed in as', h('dl', { class: 'facts' }, Object.entries(me).filter(([, v]) => typeof v !== 'object' || v === null).flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, text(v))]))));
  }
  const cards = h('div', { class: 'cards' });
  main.append(section(`Tenant ${session.tenantName ?? session.tenantId ?? ''}`, cards));
  const totals = await Promise.all(COUNTS.map(([, path]) => api(path, { query: { limit: 1 } }).then((a) => a.total, (e) => e)));
  cards.replaceChildren(...COUNTS.map(([title, , route], i) => h('div', { class: 'card' },
    h('h3', {}, h('a', { href: `#/${route}` }, title)),
    h('p', {}, totals[i] instanceof Error ? totals[i].message : String(totals[i])))));
}
