// The operator's sign-in: a database operator token (minted with
// POST /admin/security/ops-tokens), checked against the hub by reading
// GET /admin/tenants with it, then kept in memory only (api.js sends it in
// `x-admin-ops-token`). A refused token shows the envelope's words.
import { api, session } from '../api.js';
import { h, page, section, form } from '../ui.js';

export async function render(main, ctx) {
  page(main, 'Operator sign-in', 'Operators sign in with a database operator token. The console sends it in the x-admin-ops-token header and keeps it in this page’s memory only: reloading or closing the tab signs you out.');
  main.append(
    section(
      'Operator token',
      form({
        label: 'Sign in as an operator',
        submit: 'Sign in',
        fields: [
          { name: 'token', label: 'Operator token', type: 'password', required: true, hint: 'The ops_… token shown once when it was minted.' },
          { name: 'operator_id', label: 'Operator id', required: true, autocomplete: 'username', hint: 'Your name: recorded as operator_id by the routes that ask for one.' },
        ],
        onSubmit: async ({ token, operator_id }) => {
          // The hub decides: a token it refuses answers 401 here, shown under the form.
          await api('/admin/tenants', { token, kind: 'operator' });
          Object.assign(session, { token, kind: 'operator', email: null, tenantId: null, tenantName: null, operatorId: operator_id });
          const next = ctx.params.get('next');
          ctx.navigate(next && next.startsWith('ops-') ? next : 'ops-tenants');
        },
      }),
      h('p', {}, 'Tenant admins sign in ', h('a', { href: '#/signin' }, 'with their email and password'), '.'),
    ),
  );
}
