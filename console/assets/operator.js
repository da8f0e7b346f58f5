// What the operator pages (pages/ops-*.js) share: the platform chain's id,
// the regions, the tenants as choices, the operator id the routes record,
// and the platform chain's events of a kind with their payloads. The
// operator's token is sent by api.js in `x-admin-ops-token`
// (operator-interface.md, "Authentication").
import { data, session } from './api.js';

/** The chain operator actions are recorded in (a tenant id of zeros). */
export const PLATFORM_CHAIN = '00000000-0000-0000-0000-000000000000';

/** The regions of operator-interface.md's enumeration. */
export const REGIONS = ['us-east-1', 'us-west-2', 'eu-west-1', 'ap-south-1'];

/** Who the routes that take an `operator_id` record: the id given at sign-in. */
export function operatorId() {
  return session.operatorId || 'console';
}

/** Every tenant (GET /admin/tenants: newest first, at most 200). */
export async function tenants() {
  return (await data('/admin/tenants')).tenants;
}

/** Tenants as select options: [tenant_id, "name (app)"]. */
export function tenantOptions(list) {
  return list.map((t) => [t.tenant_id, `${t.display_name} (${t.app_id})`]);
}

/** A tenant id in words: its name when known. */
export function tenantName(list, id) {
  if (id === PLATFORM_CHAIN) return 'platform';
  const t = list.find((x) => x.tenant_id === id);
  return t ? t.display_name : id;
}

/**
 * The platform chain's entries whose event type starts with `prefix`,
 * newest first, each read whole (its payload), at most `max`. Looks among
 * the chain's latest 500 entries (the most GET /admin/audit/entries
 * answers).
 */
export async function platformEvents(prefix, max = 25) {
  const entries = await data('/admin/audit/entries', { query: { tenant_id: PLATFORM_CHAIN, limit: 500 } });
  const wanted = entries.filter((e) => e.event_type.startsWith(prefix)).slice(0, max);
  return Promise.all(wanted.map((e) => data(`/admin/audit/entries/${e.entry_id}`)));
}

/** An amount in minor units with its currency (as the tenant's billing page shows it). */
export function money(total, currency) {
  return `${(Number(total) / 100).toFixed(2)} ${currency}`;
}
