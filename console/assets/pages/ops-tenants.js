// Tenants: every tenant (GET /admin/tenants) with its suspension,
// suspending an open one and resuming a suspended one (its credentials
// answer 423 meanwhile), creating an app and a tenant,
// and the pool map (which pools serve each tenant; POST …/pool-map).
import { data } from '../api.js';
import { h, page, section, form, table, button, attempt, show, when, text } from '../ui.js';
import { REGIONS, tenants as listTenants, tenantOptions } from '../operator.js';

export async function render(main) {
  const { status } = page(main, 'Tenants', 'Every tenant of the platform (the newest 200). A suspended tenant’s credentials (and its sandbox’s) answer 423 Locked until it is resumed.');
  const list = h('div');
  const suspension = h('div');
  const poolMap = h('div');
  const mapForm = h('div');
  let tenants = [];
  let pools = [];
  /** Each tenant's action button, by tenant id (focused again after a change). */
  const actions = new Map();

  /** A tenant's suspension in words. */
  function standing(t) {
    const s = t.suspension;
    if (!s) return 'Not suspended';
    if (s.tenant_id !== t.tenant_id) return `Suspended with its tenant (${s.tenant_id})`;
    return `Suspended ${when(s.suspended_at)} by ${s.suspended_by}: ${s.reason}`;
  }

  /** Suspend for an open tenant, Resume for a suspended one, none for a
   * sandbox suspended with its tenant (resume the tenant). */
  function action(t) {
    const s = t.suspension;
    let b;
    if (!s) b = button('Suspend', () => askReason(t), { class: 'danger', 'aria-label': `Suspend ${t.display_name}` });
    else if (s.tenant_id === t.tenant_id) b = button('Resume', () => resume(t), { class: 'secondary', 'aria-label': `Resume ${t.display_name}` });
    else return '—';
    actions.set(t.tenant_id, b);
    return b;
  }

  async function load() {
    const [t, p] = await Promise.all([attempt(status, listTenants), attempt(status, () => data('/admin/pools'))]);
    if (t) tenants = t;
    if (p) pools = p;
    actions.clear();
    list.replaceChildren(
      h('p', {}, `${tenants.length} tenant${tenants.length === 1 ? '' : 's'}.`),
      table('Tenants', [
        ['Name', 'display_name'],
        ['Tenant id', 'tenant_id'],
        ['App', 'app_id'],
        ['Status', 'status'],
        ['Suspension', standing],
        ['Tier', 'isolation_tier'],
        ['Region', 'region'],
        ['Created', (t) => when(t.created_at)],
        ['Action', (t) => h('div', { class: 'actions' }, action(t))],
      ], tenants, 'No tenant yet.'),
    );
    poolMap.replaceChildren(table('Pool map', [
      ['Tenant', 'display_name'],
      ['Region', 'region'],
      ['Admin pool', 'admin_pool_index'],
      ['App pools', (t) => (Object.keys(t.app_pool_index ?? {}).length ? Object.entries(t.app_pool_index).map(([app, i]) => `${app} → ${i}`).join(', ') : '—')],
    ], tenants, 'No tenant yet.'));
    drawMapForm();
  }

  function askReason(t) {
    const f = form({
      label: `Suspend ${t.display_name}`,
      submit: 'Suspend',
      fields: [{ name: 'reason', label: 'Reason', required: true, hint: 'Recorded with the suspension in the tenant’s audit chain.' }],
      onSubmit: async (body) => {
        const s = await data(`/admin/tenants/${t.tenant_id}/suspend`, { method: 'POST', body });
        suspension.replaceChildren();
        await load();
        show(status, `${t.display_name} suspended by ${s.suspended_by} at ${when(s.suspended_at)}: its credentials answer 423 until it is resumed.`);
        actions.get(t.tenant_id)?.focus();
      },
    });
    suspension.replaceChildren(f);
    f.querySelector('input')?.focus();
  }

  async function resume(t) {
    if (!(await attempt(status, () => data(`/admin/tenants/${t.tenant_id}/resume`, { method: 'POST' })))) return;
    await load();
    show(status, `${t.display_name} resumed: its credentials work again.`);
    actions.get(t.tenant_id)?.focus();
  }

  function drawMapForm() {
    const byKind = (kind) => pools.filter((p) => p.kind === kind).map((p) => [String(p.pool_index), `pool ${p.pool_index}${p.region ? ` (${p.region})` : ''}`]);
    mapForm.replaceChildren(form({
      label: 'Set a tenant’s pool map',
      submit: 'Set the pool map',
      fields: [
        { name: 'tenant_id', label: 'Tenant', type: 'select', required: true, options: tenantOptions(tenants) },
        { name: 'admin_pool_index', label: 'Admin pool', type: 'select', required: true, options: byKind('admin') },
        { name: 'evidence_pool_index', label: 'Evidence pool', type: 'select', options: [['', 'none'], ...byKind('evidence')] },
        { name: 'app_pool_index', label: 'App pools (JSON)', type: 'textarea', rows: 2, json: true, hint: 'A map of app id to pool index, e.g. {"acme": 1}; empty keeps none.' },
        { name: 'region', label: 'Region', type: 'select', required: true, options: REGIONS, value: 'eu-west-1' },
        { name: 'status', label: 'Status', type: 'select', options: ['ACTIVE', 'MIGRATING', 'QUARANTINED'] },
      ],
      onSubmit: async ({ tenant_id, admin_pool_index, evidence_pool_index, ...rest }) => {
        const body = { ...rest, admin_pool_index: Number(admin_pool_index) };
        if (evidence_pool_index !== undefined) body.evidence_pool_index = Number(evidence_pool_index);
        const m = await data(`/admin/tenants/${tenant_id}/pool-map`, { method: 'POST', body });
        await load();
        show(status, `Pool map set: admin pool ${m.admin_pool_index}, ${m.status}, ${text(m.region)}.`);
      },
    }));
  }

  main.append(
    section('All tenants', list, suspension),
    section('Create',
      form({
        label: 'Create an app',
        submit: 'Create the app',
        fields: [
          { name: 'app_id', label: 'App id', required: true },
          { name: 'display_name', label: 'App name', required: true },
          { name: 'org_name', label: 'Organisation name', hint: 'Used only when the app is first created.' },
        ],
        onSubmit: async (body) => {
          const { app } = await data('/admin/apps', { method: 'POST', body });
          show(status, `App ${app.app_id} (${app.display_name}) is there, ${app.status}.`);
        },
      }),
      form({
        label: 'Create a tenant',
        submit: 'Create the tenant',
        fields: [
          { name: 'app_id', label: 'App id of the tenant', required: true, hint: 'An existing app.' },
          { name: 'display_name', label: 'Tenant name', required: true },
          { name: 'region', label: 'Tenant region', type: 'select', required: true, options: REGIONS, value: 'eu-west-1' },
          { name: 'isolation_tier', label: 'Isolation tier', type: 'select', options: [['S', 'S: shared'], ['P', 'P: private'], ['G', 'G: dedicated']] },
          { name: 'module_subscriptions', label: 'Modules', list: true, hint: 'Comma-separated; may be empty.' },
          { name: 'brand_domain', label: 'Brand domain' },
        ],
        onSubmit: async (body) => {
          const { tenant } = await data('/admin/tenants', { method: 'POST', body });
          await load();
          show(status, `Tenant ${tenant.display_name} created: ${tenant.tenant_id}.`);
        },
      })),
    section('Pool map', poolMap, mapForm),
  );
  await load();
}
