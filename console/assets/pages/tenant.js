// The tenant and its sandbox: the tenant's record (name, brand domain and
// module subscriptions editable), its child tenants, its offboarding
// state, and the sandbox its test applications' keys act in.
import { data, session } from '../api.js';
import { h, page, section, form, table, show, attempt, when, text } from '../ui.js';

function facts(record) {
  return h('dl', { class: 'facts' }, Object.entries(record).flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, k.endsWith('_at') ? when(v) : text(v))]));
}

export async function render(main) {
  const { status } = page(main, 'Tenant and sandbox');
  const record = h('div');
  const edit = h('div');
  const children = h('div');
  const offboarding = h('div');
  const sandbox = h('div');

  async function load() {
    const t = await attempt(status, () => data(`/api/tenants/${session.tenantId}`));
    if (!t) return;
    session.tenantName = t.display_name;
    record.replaceChildren(facts(t));
    edit.replaceChildren(form({
      label: 'Change the tenant',
      submit: 'Save',
      fields: [
        { name: 'display_name', label: 'Display name', value: t.display_name },
        { name: 'brand_domain', label: 'Brand domain', value: t.brand_domain ?? '' },
        { name: 'module_subscriptions', label: 'Module subscriptions', list: true, value: (t.module_subscriptions ?? []).join(' '), hint: 'Separated by spaces or commas; replaces the list.' },
      ],
      onSubmit: async (body) => {
        await data(`/api/tenants/${session.tenantId}`, { method: 'PATCH', body });
        show(status, 'Tenant saved; its sandbox follows its name and subscriptions.');
        await load();
      },
    }));
  }

  main.append(
    section('Record', record, edit),
    section('Sandbox', h('p', {}, 'The sandbox is a child tenant on the same application, created with the first key of a test application. Everything a test key (pk_test_) writes lives there; live credentials cannot see it, and test keys cannot see live data.'), sandbox),
    section('Child tenants', children),
    section('Offboarding', offboarding),
  );

  await load();
  const [apps, kids, off] = await Promise.all([
    attempt(status, () => data('/api/applications', { query: { limit: 200 } })),
    attempt(status, () => data('/api/tenants', { query: { limit: 200 } })),
    attempt(status, () => data(`/api/tenants/${session.tenantId}/offboarding`)),
  ]);
  if (apps) {
    const tests = apps.filter((a) => a.environment === 'test');
    sandbox.replaceChildren(
      tests.length
        ? table('Test applications (their keys act in the sandbox)', [['Name', 'name'], ['Slug', 'slug'], ['Status', 'status'], ['Created', (a) => when(a.created_at)]], tests)
        : h('p', { class: 'empty' }, 'No test application yet, so no sandbox: create one on the Applications and keys page.'),
      h('p', {}, h('a', { href: '#/keys' }, 'Applications and keys')),
    );
  }
  if (kids) {
    children.replaceChildren(table('Child tenants', [['Name', 'display_name'], ['Tenant', 'tenant_id'], ['Status', 'status'], ['Region', 'region'], ['Created', (c) => when(c.created_at)]], kids, 'No child tenant.'));
  }
  if (off) offboarding.replaceChildren(h('p', {}, off.state === 'not_started' ? 'Not offboarding.' : `${off.state}: deadline ${when(off.deadline_at)}${off.reason ? ` (${off.reason})` : ''}.`));
}
