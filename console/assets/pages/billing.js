// Usage and invoices: the tenant's metered usage per day and sku, its
// invoices, one invoice's line items, and rating a closed period.
import { api, data } from '../api.js';
import { h, page, section, form, table, button, show, attempt, when } from '../ui.js';

function day(offset) {
  const d = new Date();
  d.setUTCDate(d.getUTCDate() + offset);
  return d.toISOString().slice(0, 10);
}

/** Minor units in words: 12345 EUR is "123.45 EUR". */
function money(total, currency) {
  return `${(total / 100).toFixed(2)} ${currency}`;
}

export async function render(main) {
  const { status } = page(main, 'Usage and invoices', 'Usage is metered per sku and day; an invoice rates a closed period against a pricing catalog.');
  const usage = h('div');
  const invoices = h('div');
  const invoice = h('div');
  let usageFilter = { from: day(-30), to: day(0) };

  async function loadUsage() {
    const answer = await attempt(status, () => api('/api/meter/usage', { query: { ...usageFilter, limit: 500 } }));
    if (!answer) return;
    const totals = new Map();
    for (const r of answer.data) totals.set(r.sku, (totals.get(r.sku) ?? 0) + r.units);
    usage.replaceChildren(
      h('p', {}, totals.size ? `Totals: ${[...totals].map(([sku, units]) => `${sku} ${units}`).join(', ')}.` : ''),
      table('Usage per day and sku', [
        ['Day', 'day'],
        ['Sku', 'sku'],
        ['Units', 'units'],
        ['Events', 'events'],
        ['Assets', 'assets'],
      ], answer.data, 'No usage in these days.'),
    );
  }

  async function loadInvoices() {
    const list = await attempt(status, () => data('/api/billing/invoices', { query: { limit: 100 } }));
    if (!list) return;
    invoices.replaceChildren(
      table('Invoices', [
        ['Period', (i) => `${i.period_start} – ${i.period_end}`],
        ['Catalog', (i) => `${i.catalog_id} v${i.catalog_version}`],
        ['Status', 'status'],
        ['Total', (i) => money(i.total, i.currency)],
        ['Unrated skus', 'unrated_skus'],
        ['Generated', (i) => when(i.generated_at)],
        ['Action', (i) => button('Lines', () => showInvoice(i.invoice_id), { class: 'secondary', 'aria-label': `Lines of the invoice for ${i.period_start} – ${i.period_end}` })],
      ], list, 'No invoice yet.'),
    );
  }

  async function showInvoice(id) {
    const i = await attempt(status, () => data(`/api/billing/invoices/${id}`));
    if (!i) return;
    invoice.replaceChildren(
      h('h3', { tabindex: '-1' }, `Invoice ${i.period_start} – ${i.period_end}: ${money(i.total, i.currency)}`),
      table('Line items', [
        ['Sku', 'sku'],
        ['Unit', 'unit'],
        ['Mode', 'mode'],
        ['Units', 'units'],
        ['Calls', 'calls'],
        ['Price', 'price'],
        ['Margin (bp)', 'margin_bp'],
        ['Amount', (l) => money(l.amount, i.currency)],
      ], i.line_items ?? [], 'No line.'),
    );
    invoice.querySelector('h3').focus();
  }

  main.append(
    section('Usage',
      form({
        label: 'Usage days',
        submit: 'Show usage',
        fields: [
          { name: 'from', label: 'From (UTC day)', type: 'date', value: usageFilter.from },
          { name: 'to', label: 'To (UTC day)', type: 'date', value: usageFilter.to },
          { name: 'sku', label: 'Sku' },
        ],
        onSubmit: async (values) => {
          usageFilter = values;
          await loadUsage();
        },
      }),
      usage),
    section('Invoices', invoices, invoice,
      form({
        label: 'Rate a period',
        submit: 'Rate period',
        fields: [
          { name: 'catalog', label: 'Pricing catalog', required: true, hint: 'The catalog’s name; the operator publishes catalogs.' },
          { name: 'period_start', label: 'First day', type: 'date', required: true, value: day(-31) },
          { name: 'period_end', label: 'Last day (before today)', type: 'date', required: true, value: day(-1) },
        ],
        onSubmit: async (body) => {
          const made = await data('/api/billing/invoices', { method: 'POST', body });
          show(status, `Invoice for ${made.period_start} – ${made.period_end}: ${money(made.total, made.currency)}.`);
          await loadInvoices();
        },
      })),
  );
  await Promise.all([loadUsage(), loadInvoices()]);
}
