// Applications and their API keys: create an application (live or test:
// a test application's keys act in the tenant's sandbox), issue a key
// with scopes (its secret shown once), rotate, revoke, disable or enable
// an application.
import { api, data } from '../api.js';
import { h, page, section, form, table, button, secret, show, attempt, when } from '../ui.js';

/** Every scope the catalogue names (GET /capabilities.json), for the hint. */
async function knownScopes() {
  try {
    const index = await api('/capabilities.json', { token: null });
    const scopes = new Set();
    const visit = (v) => {
      if (Array.isArray(v)) v.forEach(visit);
      else if (v && typeof v === 'object') {
        if (typeof v.scope === 'string') scopes.add(v.scope);
        if (typeof v.required_scope === 'string') scopes.add(v.required_scope);
        Object.values(v).forEach(visit);
      }
    };
    visit(index);
    return [...scopes].filter((s) => /^[a-z0-9_.-]+$/.test(s)).sort();
  } catch {
    return [];
  }
}

export async function render(main, ctx) {
  const { status } = page(main, 'Applications and keys', 'An application groups API keys; each key carries scopes and acts as its own synthetic persona. A test application’s keys (pk_test_) act in the tenant’s sandbox.');
  const apps = h('div');
  const keys = h('div');
  const issued = h('div', { 'aria-live': 'polite' });
  let selected = ctx.params.get('application');

  async function loadApps() {
    const list = await attempt(status, () => data('/api/applications', { query: { limit: 200 } }));
    if (!list) return;
    if (!selected && list.length) selected = list[0].application_id;
    apps.replaceChildren(
      table('Applications', [
        ['Name', 'name'],
        ['Slug', 'slug'],
        ['Environment', 'environment'],
        ['Status', 'status'],
        ['Created', (a) => when(a.created_at)],
        [
          'Actions',
          (a) =>
            h(
              'div',
              { class: 'actions' },
              button('Keys', async () => {
                selected = a.application_id;
                await loadKeys();
                keys.querySelector('h3')?.focus();
              }, { class: 'secondary', 'aria-label': `Keys of ${a.slug}` }),
              a.status === 'disabled'
                ? button('Enable', () => act(`/api/applications/${a.application_id}/enable`, `Application ${a.slug} enabled.`), { 'aria-label': `Enable ${a.slug}` })
                : button('Disable', () => act(`/api/applications/${a.application_id}/disable`, (d) => `Application ${a.slug} disabled: ${d.keys_disabled} key(s) disabled.`), { class: 'danger', 'aria-label': `Disable ${a.slug}` }),
            ),
        ],
      ], list, 'No application yet: create one below.'),
    );
    await loadKeys();
  }

  async function loadKeys() {
    if (!selected) {
      keys.replaceChildren();
      return;
    }
    const app = await attempt(status, () => data(`/api/applications/${selected}`));
    const list = await attempt(status, () => data(`/api/applications/${selected}/keys`, { query: { limit: 200 } }));
    if (!app || !list) return;
    keys.replaceChildren(
      h('h3', { tabindex: '-1' }, `Keys of ${app.name} (${app.environment})`),
      table(`Keys of ${app.slug}`, [
        ['Name', 'name'],
        ['Key', 'masked_key'],
        ['Scopes', 'scopes'],
        ['Status', 'status'],
        ['Created', (k) => when(k.created_at)],
        ['Rotated', (k) => when(k.rotated_at)],
        [
          'Actions',
          (k) =>
            k.status === 'revoked'
              ? '—'
              : h(
                  'div',
                  { class: 'actions' },
                  button('Rotate', async () => {
                    const r = await attempt(status, () => data(`/api/api-keys/${k.key_id}/rotate`, { method: 'POST' }), `Key ${k.name} rotated: the old secret no longer works.`);
                    if (r) issued.replaceChildren(secret(`New secret of ${k.name}`, r.api_key));
                    await loadKeys();
                  }, { class: 'secondary', 'aria-label': `Rotate ${k.name}` }),
                  button('Revoke', () => act(`/api/api-keys/${k.key_id}/revoke`, `Key ${k.name} revoked.`), { class: 'danger', 'aria-label': `Revoke ${k.name}` }),
                ),
        ],
      ], list, 'No key yet.'),
      form({
        label: `Issue a key for ${app.slug}`,
        submit: 'Issue key',
        fields: [
          { name: 'name', label: 'Key name', required: true },
          { name: 'scopes', label: 'Scopes', type: 'textarea', rows: 2, list: true, required: true, hint: 'Separated by spaces or commas, e.g. me.me.read crm.contact.read (the list below names them all).' },
          { name: 'rate_limit_rpm', label: 'Rate limit (requests per minute, optional)', type: 'number', min: 1 },
        ],
        onSubmit: async (body) => {
          const made = await data(`/api/applications/${selected}/keys`, { method: 'POST', body });
          issued.replaceChildren(secret(`Secret of ${made.name}`, made.api_key));
          show(status, `Key ${made.name} issued with ${made.scopes.length} scope(s).`);
          await loadKeys();
          issued.querySelector('input')?.focus();
        },
      }),
    );
  }

  async function act(path, message) {
    const done = await attempt(status, () => data(path, { method: 'POST' }), message);
    if (done) await loadApps();
  }

  const scopes = h('details', {}, h('summary', {}, 'Scopes the catalogue knows'), h('p', { class: 'hint' }, 'Loading…'));
  main.append(
    issued,
    section('Applications', apps,
      form({
        label: 'Create an application',
        submit: 'Create application',
        fields: [
          { name: 'name', label: 'Name', required: true },
          { name: 'slug', label: 'Slug', required: true, hint: 'Lower-case letters, digits, - and _; unique in the tenant.' },
          { name: 'description', label: 'Description' },
          { name: 'environment', label: 'Environment', type: 'select', options: [['live', 'live'], ['test', 'test (sandbox)']], value: 'live' },
        ],
        onSubmit: async (body) => {
          const made = await data('/api/applications', { method: 'POST', body });
          selected = made.application_id;
          show(status, `Application ${made.slug} created.`);
          await loadApps();
        },
      })),
    section('Keys', keys),
    scopes,
  );
  await loadApps();
  knownScopes().then((list) => scopes.replaceChildren(h('summary', {}, `Scopes the catalogue knows (${list.length})`), h('p', { class: 'scopes' }, list.join(' '))));
}
