// Members, personas and role grants: the tenant's memberships, its
// personas (people's, services', agents', keys' synthetic ones), its role
// templates, and the grants beyond a persona's starting role.
import { api, data, session } from '../api.js';
import { h, page, section, form, table, button, show, attempt, when } from '../ui.js';

export async function render(main) {
  const { status } = page(main, 'Members and roles', 'People join a tenant through a membership, act through personas, and hold the permissions of their roles.');
  const members = h('div');
  const personas = h('div');
  const templates = h('div');
  const grants = h('div');
  let names = new Map();

  async function loadTemplates() {
    const list = await attempt(status, () => data('/api/role-templates', { query: { limit: 200 } }));
    if (!list) return;
    names = new Map(list.map((t) => [t.role_template_id, t.name]));
    templates.replaceChildren(table('Role templates', [
      ['Name', 'name'],
      ['Scope', (t) => (t.tenant_id ? 'this tenant' : 'platform default')],
      ['Permissions', (t) => Object.entries(t.permissions ?? {}).filter(([, v]) => v).map(([k]) => k).join(', ')],
      ['Created', (t) => when(t.created_at)],
    ], list));
    // The grant form's template choice follows the list.
    const select = main.querySelector('select[name="role_template_id"]');
    if (select) select.replaceChildren(...list.map((t) => h('option', { value: t.role_template_id }, t.name)));
  }

  const role = (id) => (id ? (names.get(id) ?? id) : '—');

  async function loadMembers() {
    const answer = await attempt(status, () => api(`/api/tenants/${session.tenantId}/memberships`, { query: { limit: 200 } }));
    if (!answer) return;
    members.replaceChildren(table(`Memberships (${answer.total})`, [
      ['Person', 'person_id'],
      ['Role', (m) => role(m.role_template_id)],
      ['Unit', 'bu_id'],
      ['Status', 'status'],
      ['Joined', (m) => when(m.joined_at)],
      ['Action', (m) => (m.status === 'active'
        ? button('Revoke', async () => {
          if (await attempt(status, () => data(`/api/memberships/${m.membership_id}/revoke`, { method: 'POST', body: {} }), 'Membership revoked.')) await loadMembers();
        }, { class: 'danger', 'aria-label': `Revoke the membership of person ${m.person_id}` })
        : '—')],
    ], answer.data));
  }

  async function loadPersonas() {
    const list = await attempt(status, () => data('/api/personas', { query: { limit: 200 } }));
    if (!list) return;
    personas.replaceChildren(table('Personas', [
      ['Persona', 'persona_id'],
      ['Kind', (p) => (p.membership_id ? p.kind : `${p.kind} (a key's)`)],
      ['Primary role', (p) => role(p.primary_role_template_id)],
      ['Status', 'status'],
      ['Created', (p) => when(p.created_at)],
    ], list));
  }

  async function loadGrants() {
    const list = await attempt(status, () => data('/api/role-assignments', { query: { limit: 200 } }));
    if (!list) return;
    grants.replaceChildren(table('Role grants', [
      ['Persona', 'persona_id'],
      ['Role', (g) => role(g.role_template_id)],
      ['Granted', (g) => when(g.granted_at)],
      ['Granted by', 'granted_by'],
      ['Revoked', (g) => when(g.revoked_at)],
      ['Action', (g) => (g.revoked_at
        ? '—'
        : button('Revoke', async () => {
          if (await attempt(status, () => data(`/api/role-assignments/${g.assignment_id}/revoke`, { method: 'POST', body: {} }), 'Grant revoked.')) await loadGrants();
        }, { class: 'danger', 'aria-label': `Revoke ${role(g.role_template_id)} from persona ${g.persona_id}` }))],
    ], list, 'No grant beyond the starting roles.'));
  }

  main.append(
    section('Memberships', members, form({
      label: 'Admit a person',
      submit: 'Admit',
      fields: [
        { name: 'person_id', label: 'Person id', required: true, hint: 'An existing person (they register with /api/auth/register).' },
        { name: 'bu_id', label: 'Business unit (optional)' },
      ],
      onSubmit: async (body) => {
        await data('/api/memberships', { method: 'POST', body });
        show(status, 'Person admitted.');
        await Promise.all([loadMembers(), loadPersonas()]);
      },
    })),
    section('Personas', personas),
    section('Role templates', templates, form({
      label: 'Define a role template',
      submit: 'Define role',
      fields: [
        { name: 'name', label: 'Name', required: true },
        { name: 'permissions', label: 'Permissions (JSON object)', type: 'textarea', rows: 3, json: true, required: true, value: '{"crm.contact.read": true}', hint: 'Scope pattern to true; only permissions you hold.' },
      ],
      onSubmit: async (body) => {
        await data('/api/role-templates', { method: 'POST', body });
        show(status, `Role ${body.name} defined.`);
        await loadTemplates();
      },
    })),
    section('Role grants', grants, form({
      label: 'Grant a role',
      submit: 'Grant',
      fields: [
        { name: 'persona_id', label: 'Persona id', required: true },
        { name: 'role_template_id', label: 'Role', type: 'select', required: true, options: [] },
      ],
      onSubmit: async (body) => {
        await data('/api/role-assignments', { method: 'POST', body });
        show(status, 'Role granted.');
        await loadGrants();
      },
    })),
  );
  await loadTemplates();
  await Promise.all([loadMembers(), loadPersonas(), loadGrants()]);
}
