// Sign in as a tenant admin (email and password, POST /api/auth/login),
// choosing the tenant when the person belongs to several; or sign up a new
// tenant (POST /api/auth/signup-tenant), which signs its owner in.
import { api, data, session, claims } from '../api.js';
import { h, page, section, form, show } from '../ui.js';
import { routes } from '../routes.js';

/** Signs in with a tenant JWT and goes on to `next`. */
function enter(token, email, tenantName, ctx) {
  const c = claims(token);
  Object.assign(session, { token, kind: 'tenant', email, tenantId: c.tenant_id ?? null, tenantName });
  ctx.navigate(ctx.params.get('next') || 'overview');
}

async function login(email, password, tenant_id) {
  return (await api('/api/auth/login', { method: 'POST', body: tenant_id ? { email, password, tenant_id } : { email, password }, token: null })).data.token;
}

export async function render(main, ctx) {
  const { status } = page(main, 'Sign in', 'Tenant admins sign in with their email and password. The console keeps the token in this page’s memory only: reloading or closing the tab signs you out.');
  const choose = h('div', { class: 'choose' });

  main.append(
    section(
      'Tenant admin',
      form({
        label: 'Sign in as a tenant admin',
        submit: 'Sign in',
        fields: [
          { name: 'email', label: 'Email', type: 'email', required: true, autocomplete: 'username' },
          { name: 'password', label: 'Password', type: 'password', required: true, autocomplete: 'current-password' },
        ],
        onSubmit: async ({ email, password }) => {
          // A person-level token first: it lists the person's tenants.
          const person = await login(email, password);
          const memberships = await data('/api/memberships', { token: person });
          const tenants = [...new Map(memberships.map((m) => [m.tenant_id, m])).values()];
          if (tenants.length === 0) {
            show(status, new Error('This person is a member of no tenant yet: sign up a tenant below.'));
            return;
          }
          if (tenants.length === 1) {
            enter(await login(email, password, tenants[0].tenant_id), email, tenants[0].tenant_display_name, ctx);
            return;
          }
          choose.replaceChildren(
            form({
              label: 'Choose the tenant',
              submit: 'Continue',
              fields: [{ name: 'tenant_id', label: 'Tenant', type: 'select', required: true, options: tenants.map((t) => [t.tenant_id, `${t.tenant_display_name} (${t.app_id})`]) }],
              onSubmit: async ({ tenant_id }) => {
                const chosen = tenants.find((t) => t.tenant_id === tenant_id);
                enter(await login(email, password, tenant_id), email, chosen?.tenant_display_name, ctx);
              },
            }),
          );
          choose.querySelector('select')?.focus();
        },
      }),
      choose,
    ),
  );

  main.append(
    section(
      'New tenant',
      h('p', {}, 'Creates a tenant, its organisation and application, and you as its owner; you are then signed in.'),
      form({
        label: 'Sign up a tenant',
        submit: 'Sign up',
        fields: [
          { name: 'email', label: 'Email', type: 'email', required: true, autocomplete: 'email' },
          { name: 'password', label: 'Password', type: 'password', required: true, autocomplete: 'new-password', minlength: 8, hint: 'At least 8 characters.' },
          { name: 'display_name', label: 'Your name', required: true, autocomplete: 'name' },
          { name: 'org_name', label: 'Organisation', required: true, autocomplete: 'organization' },
          { name: 'app_id', label: 'Application id', required: true, hint: 'Unique on the platform, e.g. acme.' },
          { name: 'region', label: 'Region', required: true, value: 'eu-west-1' },
        ],
        onSubmit: async (body) => {
          const made = (await api('/api/auth/signup-tenant', { method: 'POST', body, token: null })).data;
          enter(made.token, body.email, body.org_name, ctx);
        },
      }),
    ),
  );
  // Other sign-ins (the operator's token, say) are their own pages, marked
  // `signin: true` in routes.js, and linked from here.
  const others = routes.filter((r) => r.signin && r.path !== 'signin');
  if (others.length) {
    main.append(section('Other ways to sign in', h('ul', {}, others.map((r) => h('li', {}, h('a', { href: `#/${r.path}` }, r.title))))));
  }
}
