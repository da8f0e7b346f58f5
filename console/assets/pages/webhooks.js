// Webhooks: endpoints (create, send a test, disable/enable, rotate the
// signing secret, delete), recent deliveries with their attempts, and dead
// letters with retry.
import { data, session } from '../api.js';
import { h, page, section, form, table, button, secret, show, attempt, when, text } from '../ui.js';

export async function render(main) {
  const { status } = page(main, 'Webhooks', 'Signed deliveries (Standard Webhooks) of the tenant’s events to its endpoints, retried with backoff; a delivery that exhausts its attempts becomes a dead letter.');
  const shown = h('div', { 'aria-live': 'polite' });
  const endpoints = h('div');
  const deliveries = h('div');
  const detail = h('div');
  const dead = h('div');
  const filter = { status: '', endpoint_id: '' };

  async function loadEndpoints() {
    const list = await attempt(status, () => data('/api/webhooks/endpoints', { query: { limit: 200 } }));
    if (!list) return;
    endpoints.replaceChildren(
      table('Endpoints', [
        ['URL', 'url'],
        ['Events', 'event_types'],
        ['Status', (e) => (e.disabled_reason ? `${e.status} (${e.disabled_reason})` : e.status)],
        ['Failures in a row', 'failure_streak'],
        ['Last success', (e) => when(e.last_success_at)],
        ['Old secret signs until', (e) => when(e.previous_secret_until)],
        [
          'Actions',
          (e) =>
            h(
              'div',
              { class: 'actions' },
              button('Send test', async () => {
                const d = await attempt(status, () => data(`/api/webhooks/endpoints/${e.endpoint_id}/test`, { method: 'POST' }), 'Test delivery queued.');
                if (d) {
                  await loadDeliveries();
                  await showDelivery(d.delivery_id);
                }
              }, { class: 'secondary', 'aria-label': `Send test to ${e.url}` }),
              button('Rotate secret', async () => {
                const r = await attempt(status, () => data(`/api/webhooks/endpoints/${e.endpoint_id}/rotate-secret`, { method: 'POST', body: {} }), 'Secret rotated: the old one signs beside it for a day.');
                if (r) shown.replaceChildren(secret(`New signing secret of ${e.url}`, r.secret));
                await loadEndpoints();
              }, { class: 'secondary', 'aria-label': `Rotate secret of ${e.url}` }),
              e.status === 'active'
                ? button('Disable', () => act(`/api/webhooks/endpoints/${e.endpoint_id}/disable`, 'Endpoint disabled.'), { class: 'secondary', 'aria-label': `Disable ${e.url}` })
                : button('Enable', () => act(`/api/webhooks/endpoints/${e.endpoint_id}/enable`, 'Endpoint enabled.'), { class: 'secondary', 'aria-label': `Enable ${e.url}` }),
              button('Delete', () => act(`/api/webhooks/endpoints/${e.endpoint_id}`, 'Endpoint deleted.', 'DELETE'), { class: 'danger', 'aria-label': `Delete ${e.url}` }),
            ),
        ],
      ], list, 'No endpoint yet.'),
    );
  }

  async function loadDeliveries() {
    const list = await attempt(status, () => data('/api/webhooks/deliveries', { query: { limit: 50, ...filter } }));
    if (!list) return;
    deliveries.replaceChildren(
      table('Recent deliveries', [
        ['Event', 'event_type'],
        ['Status', 'status'],
        ['Attempts', 'attempts'],
        ['Last answer', (d) => d.last_status_code ?? d.last_error],
        ['Created', (d) => when(d.created_at)],
        ['Action', (d) => button('Attempts', () => showDelivery(d.delivery_id), { class: 'secondary', 'aria-label': `Attempts of delivery ${d.delivery_id}` })],
      ], list, 'No delivery yet.'),
    );
  }

  async function showDelivery(id) {
    const d = await attempt(status, () => data(`/api/webhooks/deliveries/${id}`));
    if (!d) return;
    detail.replaceChildren(
      h('h3', { tabindex: '-1' }, `Delivery ${d.delivery_id}: ${d.status}`),
      table('Attempts', [
        ['#', 'attempt'],
        ['Started', (a) => when(a.started_at)],
        ['Duration (ms)', 'duration_ms'],
        ['Status code', 'status_code'],
        ['Error', 'error'],
        ['Response', (a) => text(a.response)],
      ], d.attempt_history ?? [], 'Not attempted yet: the worker picks it up within seconds.'),
    );
  }

  async function loadDead() {
    const list = await attempt(status, () => data('/api/webhooks/deadletters', { query: { tenant_id: session.tenantId, limit: 50 } }));
    if (!list) return;
    dead.replaceChildren(
      table('Dead letters', [
        ['Event', 'event_type'],
        ['Attempts', 'attempts'],
        ['Last error', (d) => d.last_error ?? d.last_status_code],
        ['Finished', (d) => when(d.finished_at)],
        ['Action', (d) => button('Retry', async () => {
          if (await attempt(status, () => data(`/api/webhooks/deadletters/${d.delivery_id}/retry`, { method: 'POST' }), 'Delivery queued again.')) {
            await loadDead();
            await loadDeliveries();
          }
        }, { 'aria-label': `Retry delivery ${d.delivery_id}` })],
      ], list, 'No dead letter.'),
    );
  }

  async function act(path, message, method = 'POST') {
    if (await attempt(status, () => data(path, { method }), message)) await loadEndpoints();
  }

  main.append(
    shown,
    section('Endpoints', endpoints, form({
      label: 'Add an endpoint',
      submit: 'Add endpoint',
      fields: [
        { name: 'url', label: 'URL', type: 'url', required: true, placeholder: 'https://example.com/hooks' },
        { name: 'event_types', label: 'Event types', type: 'textarea', rows: 2, list: true, required: true, hint: 'Separated by spaces or commas, e.g. crm.contact.created.v1 (the audit page lists them).' },
        { name: 'description', label: 'Description' },
      ],
      onSubmit: async (body) => {
        const made = await data('/api/webhooks/endpoints', { method: 'POST', body });
        shown.replaceChildren(secret(`Signing secret of ${made.url}`, made.secret));
        show(status, `Endpoint ${made.url} added.`);
        await loadEndpoints();
      },
    })),
    section('Deliveries',
      form({
        label: 'Filter deliveries',
        submit: 'Show',
        fields: [{ name: 'status', label: 'Status', type: 'select', options: [['', 'any'], 'pending', 'succeeded', 'dead'] }],
        onSubmit: async (values) => {
          filter.status = values.status ?? '';
          await loadDeliveries();
        },
      }),
      button('Refresh deliveries', loadDeliveries, { class: 'secondary' }),
      deliveries, detail),
    section('Dead letters', dead),
  );
  await Promise.all([loadEndpoints(), loadDeliveries(), loadDead()]);
}
