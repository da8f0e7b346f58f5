// Pricing catalogs and rates: every catalog version (GET
// /admin/meter/pricing-catalogs), creating one (draft), a catalog's latest
// version with its rates, setting a sku's rate (PUT …/rates/{sku}) and the
// catalog's status (PATCH …/status: activating records
// billing.catalog.activated.v1 in the platform chain).
import { data } from '../api.js';
import { h, page, section, form, table, button, attempt, show, when, text } from '../ui.js';
import { operatorId, money } from '../operator.js';

const MODES = ['flat_per_call', 'tiered_per_call', 'passthrough_plus_margin', 'per_unit', 'bundled_subscription', 'free_internal'];

export async function render(main, ctx) {
  const { status } = page(main, 'Pricing catalogs', 'Invoices price usage with the active catalog. A rate or a status change applies to a catalog’s latest version; prices are integer minor units.');
  const list = h('div');
  const detail = h('div');

  async function load() {
    const catalogs = await attempt(status, () => data('/admin/meter/pricing-catalogs'));
    if (!catalogs) return;
    list.replaceChildren(table('Catalog versions', [
      ['Catalog', 'catalog_id'],
      ['Version', 'version'],
      ['Status', 'status'],
      ['Currency', 'currency'],
      ['Created by', 'created_by'],
      ['Updated', (c) => when(c.updated_at)],
      ['Action', (c) => button('Rates', () => open(c.catalog_id), { class: 'secondary', 'aria-label': `Rates of ${c.catalog_id} version ${c.version}` })],
    ], catalogs, 'No catalog yet.'));
  }

  async function open(id) {
    const answer = await attempt(status, () => data(`/admin/meter/pricing-catalogs/${encodeURIComponent(id)}`));
    if (!answer) return;
    const { catalog, rates } = answer;
    const price = (r) => (r.price === null || r.price === undefined ? '—' : money(r.price, catalog.currency));
    detail.replaceChildren(
      h('h3', { tabindex: '-1' }, `${catalog.catalog_id} version ${catalog.version}: ${catalog.status}`),
      table(`Rates of ${catalog.catalog_id}`, [
        ['Sku', 'sku'],
        ['Unit', 'unit'],
        ['Mode', 'mode'],
        ['Price', price],
        ['Margin %', (r) => text(r.margin_pct)],
        ['Tiers', (r) => (r.tiers ? r.tiers.map((t) => `${t.up_to === null || t.up_to === undefined ? 'then' : `≤ ${t.up_to}`}: ${money(t.unit_price, catalog.currency)}`).join('; ') : '—')],
        ['Set by', 'updated_by'],
        ['Updated', (r) => when(r.updated_at)],
      ], rates, 'No rate yet.'),
      form({
        label: `Set a rate in ${catalog.catalog_id}`,
        submit: 'Set the rate',
        fields: [
          { name: 'sku', label: 'Sku', required: true, hint: 'e.g. api.call' },
          { name: 'unit', label: 'Unit', required: true, value: 'call' },
          { name: 'mode', label: 'Mode', type: 'select', required: true, options: MODES },
          { name: 'price', label: 'Price (minor units)', type: 'number', min: 0, hint: 'Required except for tiered_per_call and free_internal.' },
          { name: 'margin_pct', label: 'Margin %', type: 'number', step: '0.01', min: -100, max: 1000, hint: 'For passthrough_plus_margin.' },
          { name: 'tiers', label: 'Tiers (JSON)', type: 'textarea', rows: 3, json: true, hint: 'For tiered_per_call: [{"up_to": 1000, "unit_price": 2}, {"up_to": null, "unit_price": 1}]' },
        ],
        onSubmit: async ({ sku, ...body }) => {
          const r = await data(`/admin/meter/pricing-catalogs/${encodeURIComponent(catalog.catalog_id)}/rates/${encodeURIComponent(sku)}`, { method: 'PUT', body: { ...body, operator_id: operatorId() } });
          await open(catalog.catalog_id);
          show(status, `Rate of ${r.sku} set in ${r.catalog_id} version ${r.version}: ${r.mode}.`);
        },
      }),
      form({
        label: `Set the status of ${catalog.catalog_id}`,
        submit: 'Set the status',
        fields: [{ name: 'status', label: 'Status', type: 'select', required: true, options: ['draft', 'active', 'retired'], value: catalog.status }],
        onSubmit: async ({ status: next }) => {
          await setStatus(catalog.catalog_id, next);
          await Promise.all([load(), open(catalog.catalog_id)]);
          show(status, `${catalog.catalog_id} is ${next}.`);
        },
      }),
    );
    detail.querySelector('h3').focus();
  }

  async function setStatus(id, next) {
    await data(`/admin/meter/pricing-catalogs/${encodeURIComponent(id)}/status`, { method: 'PATCH', body: { status: next, operator_id: operatorId() } });
  }

  main.append(
    section('Catalogs', list,
      form({
        label: 'Create a catalog version',
        submit: 'Create',
        fields: [
          { name: 'catalog_id', label: 'Catalog id', required: true },
          { name: 'version', label: 'Version', type: 'number', min: 1, value: 1, required: true },
          { name: 'currency', label: 'Currency', hint: 'ISO code; empty: the hub’s default.' },
        ],
        onSubmit: async (body) => {
          const c = await data('/admin/meter/pricing-catalogs', { method: 'POST', body: { ...body, operator_id: operatorId() } });
          await load();
          await open(c.catalog_id);
          show(status, `Catalog ${c.catalog_id} version ${c.version} created, ${c.status}.`);
        },
      })),
    section('Catalog', detail),
  );
  await load();
  if (ctx.params.get('catalog')) await open(ctx.params.get('catalog'));
}
