// Every page of the console, in one table: the hash route (#/<path>), the
// title shown in the navigation, its group, who may open it, and its
// module (pages/<name>.js, which exports `render(main, ctx)`; see
// console/README.md). The navigation is built from this table, in order.
//
// `who`: 'anyone' (no sign-in), 'tenant' (a tenant admin's JWT) or
// 'operator' (an operator token). Operator pages go in the 'Operator'
// group, below the tenant ones. A sign-in page of its own (who 'anyone',
// group null) marked `signin: true` is linked from the sign-in page.
export const routes = [
  { path: 'signin', title: 'Sign in', group: null, who: 'anyone', signin: true, module: './pages/signin.js' },
  { path: 'overview', title: 'Overview', group: 'Tenant', who: 'tenant', module: './pages/overview.js' },
  { path: 'tenant', title: 'Tenant and sandbox', group: 'Tenant', who: 'tenant', module: './pages/tenant.js' },
  { path: 'members', title: 'Members and roles', group: 'Tenant', who: 'tenant', module: './pages/members.js' },
  { path: 'keys', title: 'Applications and keys', group: 'Tenant', who: 'tenant', module: './pages/keys.js' },
  { path: 'webhooks', title: 'Webhooks', group: 'Tenant', who: 'tenant', module: './pages/webhooks.js' },
  { path: 'flags', title: 'Feature flags', group: 'Tenant', who: 'tenant', module: './pages/flags.js' },
  { path: 'audit', title: 'Audit log', group: 'Tenant', who: 'tenant', module: './pages/audit.js' },
  { path: 'robots', title: 'Robots', group: 'Tenant', who: 'tenant', module: './pages/robots.js' },
  { path: 'billing', title: 'Usage and invoices', group: 'Tenant', who: 'tenant', module: './pages/billing.js' },
  // Operator pages (group 'Operator', who 'operator') are added here.
  { path: 'ops-signin', title: 'Operator sign-in', group: null, who: 'anyone', signin: true, module: './pages/ops-signin.js' },
  { path: 'ops-tenants', title: 'Tenants', group: 'Operator', who: 'operator', module: './pages/ops-tenants.js' },
  { path: 'ops-pools', title: 'Pools', group: 'Operator', who: 'operator', module: './pages/ops-pools.js' },
  { path: 'ops-tokens', title: 'Operator tokens', group: 'Operator', who: 'operator', module: './pages/ops-tokens.js' },
  { path: 'ops-signing-key', title: 'Signing key', group: 'Operator', who: 'operator', module: './pages/ops-signing-key.js' },
  { path: 'ops-pricing', title: 'Pricing catalogs', group: 'Operator', who: 'operator', module: './pages/ops-pricing.js' },
  { path: 'ops-invoices', title: 'Invoices', group: 'Operator', who: 'operator', module: './pages/ops-invoices.js' },
  { path: 'ops-byok', title: 'BYOK bindings', group: 'Operator', who: 'operator', module: './pages/ops-byok.js' },
  { path: 'ops-audit', title: 'Platform audit', group: 'Operator', who: 'operator', module: './pages/ops-audit.js' },
  { path: 'ops-health', title: 'Health', group: 'Operator', who: 'operator', module: './pages/ops-health.js' },
];

/** Where each kind of session lands when the page asked for is not its
 * own (without an entry: its first page in this table). */
export const home = { tenant: 'overview', operator: 'ops-tenants' };
