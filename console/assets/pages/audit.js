// The audit log: the tenant's entries by type and time (newest first),
// one entry whole, and the verification of a chain (entries_checked).
import { api, data } from '../api.js';
import { h, page, section, form, table, button, attempt, when, text, uid } from '../ui.js';

const PAGE = 50;

export async function render(main) {
  const { status } = page(main, 'Audit log', 'Every change the tenant’s credentials make is an entry in a hash chain per pool; verifying a chain recomputes every hash.');
  const entries = h('div');
  const entry = h('div');
  const verdict = h('div', { 'aria-live': 'polite' });
  const types = h('datalist', { id: uid('types') });
  let filter = {};
  let offset = 0;

  async function load() {
    const answer = await attempt(status, () => api('/api/audit/entries', { query: { ...filter, limit: PAGE, offset } }));
    if (!answer) return;
    const rows = answer.data;
    entries.replaceChildren(
      h('p', {}, `${answer.total} entr${answer.total === 1 ? 'y' : 'ies'}; showing ${rows.length ? `${offset + 1}–${offset + rows.length}` : 'none'}.`),
      table('Audit entries', [
        ['Occurred', (e) => when(e.occurred_at)],
        ['Type', 'event_type'],
        ['Actor', (e) => `${e.actor_kind} ${e.actor_id}`],
        ['Pool', 'pool_index'],
        ['Seq', 'seq'],
        ['Retention', (e) => (e.shredded_at ? `${e.retention_class} (shredded)` : e.retention_class)],
        ['Action', (e) => button('Details', () => showEntry(e.entry_id), { class: 'secondary', 'aria-label': `Details of entry ${e.seq} of pool ${e.pool_index}` })],
      ], rows, 'No entry matches.'),
      h('div', { class: 'actions' },
        offset > 0 && button('Newer', async () => { offset = Math.max(0, offset - PAGE); await load(); }, { class: 'secondary' }),
        offset + rows.length < answer.total && button('Older', async () => { offset += PAGE; await load(); }, { class: 'secondary' })),
    );
  }

  async function showEntry(id) {
    const e = await attempt(status, () => data(`/api/audit/entries/${id}`));
    if (!e) return;
    entry.replaceChildren(
      h('h3', { tabindex: '-1' }, `Entry ${e.seq} of pool ${e.pool_index}: ${e.event_type}`),
      h('dl', { class: 'facts' }, Object.entries(e).flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, text(v))])),
    );
    entry.querySelector('h3').focus();
  }

  main.append(
    section('Entries',
      form({
        label: 'Filter entries',
        submit: 'Show entries',
        fields: [
          { name: 'event_type', label: 'Event type', placeholder: 'e.g. identity.api_key.issued.v1' },
          { name: 'from', label: 'From', type: 'datetime-local' },
          { name: 'to', label: 'To', type: 'datetime-local' },
          { name: 'pool_index', label: 'Pool', type: 'number', min: 0 },
        ],
        onSubmit: async (values) => {
          filter = values;
          offset = 0;
          await load();
        },
      }),
      types,
      entries,
      entry),
    section('Verify a chain',
      form({
        label: 'Verify the chain of a pool',
        submit: 'Verify',
        fields: [{ name: 'pool_index', label: 'Pool', type: 'number', min: 0, value: 0, required: true }],
        onSubmit: async (body) => {
          const v = await data('/api/audit/verify', { method: 'POST', body });
          verdict.replaceChildren(
            h('p', { class: `message ${v.ok ? 'ok' : 'error'}` },
              v.ok
                ? `Chain of pool ${v.pool_index} verified: ${v.entries_checked} entries checked, every hash holds.`
                : `Chain of pool ${v.pool_index} broken at seq ${v.failed_seq} (${v.reason}); ${v.entries_checked} entries checked.`),
          );
        },
      }),
      verdict),
  );
  // The filter's event type field suggests the registered types.
  const typeInput = main.querySelector('input[name="event_type"]');
  typeInput.setAttribute('list', types.id);
  data('/api/events/types', { query: { limit: 500 } })
    .then((d) => {
      const list = Array.isArray(d) ? d : (d.types ?? d.event_types ?? []);
      types.replaceChildren(...list.map((t) => h('option', { value: t.event_type ?? t })));
    })
    .catch(() => {});
  await load();
}
