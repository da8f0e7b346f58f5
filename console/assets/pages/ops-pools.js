// Pools: every routing pool (GET /admin/pools), the tenants each serves
// (from the tenants' pool maps), and creating one (POST /admin/pools).
import { data } from '../api.js';
import { h, page, section, form, table, attempt, show, when } from '../ui.js';
import { REGIONS, tenants as listTenants } from '../operator.js';

export async function render(main) {
  const { status } = page(main, 'Pools', 'The database pools a pool map can name: admin pools hold a tenant’s chain and identity, app pools an app’s data, evidence pools its evidence. A pool index is taken once.');
  const list = h('div');

  async function load() {
    const [pools, tenants] = await Promise.all([attempt(status, () => data('/admin/pools')), attempt(status, listTenants)]);
    if (!pools) return;
    const serving = (p) => (tenants ?? []).filter((t) => (p.kind === 'admin' && t.admin_pool_index === p.pool_index) || (p.kind === 'app' && Object.values(t.app_pool_index ?? {}).includes(p.pool_index))).length;
    list.replaceChildren(table('Pools', [
      ['Index', 'pool_index'],
      ['Kind', 'kind'],
      ['Region', 'region'],
      ['Tenants mapped to it', (p) => (p.kind === 'evidence' ? '—' : serving(p))],
      ['Created', (p) => when(p.created_at)],
    ], pools, 'No pool.'));
  }

  main.append(
    section('All pools', list),
    section('Create a pool',
      form({
        label: 'Create a pool',
        submit: 'Create the pool',
        fields: [
          { name: 'pool_index', label: 'Pool index', type: 'number', min: 0, max: 1000000, required: true },
          { name: 'kind', label: 'Kind', type: 'select', required: true, options: ['admin', 'app', 'evidence'] },
          { name: 'region', label: 'Region', type: 'select', required: true, options: REGIONS, value: 'eu-west-1' },
        ],
        onSubmit: async (body) => {
          const p = await data('/admin/pools', { method: 'POST', body });
          await load();
          show(status, `Pool ${p.pool_index} (${p.kind}, ${p.region}) created.`);
        },
      })),
  );
  await load();
}
