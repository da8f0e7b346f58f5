// The platform audit chain, and any tenant's: entries newest first
// (GET /admin/audit/entries, by tenant, actor and time; at most 500), one
// entry whole, and the verification of every chain of a tenant
// (POST /admin/audit/verify), the platform's included.
import { data } from '../api.js';
import { h, page, section, form, table, button, attempt, when, text } from '../ui.js';
import { PLATFORM_CHAIN, tenants as listTenants, tenantOptions, tenantName } from '../operator.js';

export async function render(main) {
  const { status } = page(main, 'Platform audit', 'Operator actions are entries of the platform chain (tenant id of zeros); each tenant has its own chains, one per pool. Verifying recomputes every hash.');
  const tenants = (await attempt(status, listTenants)) ?? [];
  const chains = [[PLATFORM_CHAIN, 'the platform chain'], ...tenantOptions(tenants)];
  const entries = h('div');
  const entry = h('div');
  const verdict = h('div', { 'aria-live': 'polite' });
  let filter = { tenant_id: PLATFORM_CHAIN };

  async function load() {
    const rows = await attempt(status, () => data('/admin/audit/entries', { query: filter }));
    if (!rows) return;
    entries.replaceChildren(
      h('p', {}, `${rows.length} entr${rows.length === 1 ? 'y' : 'ies'}, newest first.`),
      table('Platform audit entries', [
        ['Occurred', (e) => when(e.occurred_at)],
        ['Chain', (e) => tenantName(tenants, e.tenant_id)],
        ['Type', 'event_type'],
        ['Actor', (e) => `${e.actor_kind} ${e.actor_id}`],
        ['Pool', 'pool_index'],
        ['Seq', 'seq'],
        ['Action', (e) => button('Details', () => show(e.entry_id), { class: 'secondary', 'aria-label': `Details of entry ${e.seq} of ${tenantName(tenants, e.tenant_id)}, pool ${e.pool_index}` })],
      ], rows, 'No entry matches.'),
    );
  }

  async function show(id) {
    const e = await attempt(status, () => data(`/admin/audit/entries/${encodeURIComponent(id)}`));
    if (!e) return;
    entry.replaceChildren(
      h('h3', { tabindex: '-1' }, `Entry ${e.seq} of ${tenantName(tenants, e.tenant_id)}, pool ${e.pool_index}: ${e.event_type}`),
      h('dl', { class: 'facts' }, Object.entries(e).flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, text(v))])),
    );
    entry.querySelector('h3').focus();
  }

  main.append(
    section('Entries',
      form({
        label: 'Filter audit entries',
        submit: 'Show entries',
        fields: [
          { name: 'tenant_id', label: 'Chain', type: 'select', options: [...chains, ['', 'every chain']], value: PLATFORM_CHAIN },
          { name: 'actor_id', label: 'Actor id' },
          { name: 'from', label: 'From', type: 'datetime-local' },
          { name: 'to', label: 'To', type: 'datetime-local' },
          { name: 'limit', label: 'At most', type: 'number', min: 1, max: 500, value: 100 },
        ],
        onSubmit: async (values) => {
          filter = values;
          await load();
        },
      }),
      entries,
      entry),
    section('Verify',
      form({
        label: 'Verify the chains of a tenant',
        submit: 'Verify',
        fields: [{ name: 'tenant_id', label: 'Chains of', type: 'select', required: true, options: chains, value: PLATFORM_CHAIN }],
        onSubmit: async ({ tenant_id }) => {
          const v = await data('/admin/audit/verify', { method: 'POST', query: { tenant_id } });
          const who = tenantName(tenants, tenant_id);
          verdict.replaceChildren(
            h('p', { class: `message ${v.verified ? 'ok' : 'error'}`, role: v.verified ? null : 'alert' },
              v.verified
                ? `${who}: verified, ${v.entry_count} entries checked in ${v.chains.length} chain${v.chains.length === 1 ? '' : 's'}; every hash holds.`
                : `${who}: broken in pool ${v.pool_index} at seq ${v.failed_seq} (${v.reason}); ${v.entry_count} entries checked.`),
            table(`Chains of ${who}`, [
              ['Pool', 'pool_index'],
              ['Verified', (c) => (c.ok ? 'yes' : 'no')],
              ['Entries checked', 'entries_checked'],
              ['Failed at seq', (c) => text(c.failed_seq)],
              ['Reason', (c) => text(c.reason)],
            ], v.chains, 'No chain: nothing recorded yet.'),
          );
        },
      }),
      verdict),
  );
  await load();
}
