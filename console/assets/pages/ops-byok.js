// BYOK bindings: a tenant's binding to a customer-managed key (found by
// tenant: the hub has no list route), binding one, rotating its tenant key
// (every data key re-wrapped) and revoking its grant.
import { data } from '../api.js';
import { h, page, section, form, attempt, show, when, text } from '../ui.js';
import { operatorId, tenants as listTenants, tenantOptions, tenantName } from '../operator.js';

const PROVIDERS = ['aws-kms', 'gcp-kms', 'hsm-pkcs11'];

export async function render(main, ctx) {
  const { status } = page(main, 'BYOK bindings', 'A bound tenant’s data keys are wrapped under its customer-managed key. Revoking the grant makes them unreadable on every replica within the binding’s propagation SLA.');
  const tenants = (await attempt(status, listTenants)) ?? [];
  const options = tenantOptions(tenants);
  const binding = h('div');

  function facts(b) {
    return h('dl', { class: 'facts' }, [
      ['Tenant', tenantName(tenants, b.tenant_id)], ['Binding id', b.binding_id], ['Provider', b.provider], ['Customer key', b.customer_kms_key_arn],
      ['Tenant key', b.tenant_key_id], ['Grant', b.grant_status], ['Bound', when(b.bound_at)], ['Revoked', b.revoked_at ? when(b.revoked_at) : '—'],
      ['Revocation SLA', `${b.sla_revoke_propagation_seconds} s`], ['SIEM forwarder', text(b.siem_forwarder_endpoint)],
    ].flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
  }

  async function find(tenantId) {
    const b = await attempt(status, () => data(`/admin/byok/bindings/tenant/${encodeURIComponent(tenantId)}`));
    if (!b) {
      binding.replaceChildren();
      return;
    }
    draw(b);
  }

  function draw(b) {
    const name = tenantName(tenants, b.tenant_id);
    binding.replaceChildren(h('h3', { tabindex: '-1' }, `Binding of ${name}`), facts(b));
    if (b.grant_status === 'active') {
      binding.append(
        form({
          label: `Rotate the tenant key of ${name}`,
          submit: 'Rotate',
          fields: [
            { name: 'previous_tenant_key_id', label: 'Current tenant key', required: true, value: b.tenant_key_id },
            { name: 'new_tenant_key_id', label: 'New tenant key', required: true, hint: 'Never used before.' },
          ],
          onSubmit: async (body) => {
            const r = await data(`/admin/byok/bindings/${b.binding_id}/rotate`, { method: 'POST', body: { ...body, operator_id: operatorId() } });
            await find(b.tenant_id);
            show(status, `Tenant key of ${name} rotated to ${r.new_tenant_key_id}: ${r.rewrapped_keys} data key${r.rewrapped_keys === 1 ? '' : 's'} re-wrapped.`);
          },
        }),
        form({
          label: `Revoke the binding of ${name}`,
          submit: 'Revoke the grant',
          fields: [{ name: 'reason', label: 'Reason for the revocation', required: true }],
          onSubmit: async (body) => {
            const r = await data(`/admin/byok/bindings/${b.binding_id}/revoke`, { method: 'POST', body: { ...body, operator_id: operatorId() } });
            draw(r);
            show(status, `Binding of ${name} ${r.grant_status}${r.revoked_at ? ` at ${when(r.revoked_at)}` : ''}.`);
          },
        }),
      );
    }
    binding.querySelector('h3').focus();
  }

  main.append(
    section('Find a binding',
      form({
        label: 'Find a tenant’s binding',
        submit: 'Find',
        fields: [{ name: 'tenant_id', label: 'Tenant', type: 'select', required: true, options, value: ctx.params.get('tenant') }],
        onSubmit: async ({ tenant_id }) => find(tenant_id),
      }),
      binding),
    section('Bind a tenant',
      form({
        label: 'Bind a tenant to a customer key',
        submit: 'Bind',
        fields: [
          { name: 'tenant_id', label: 'Tenant to bind', type: 'select', required: true, options },
          { name: 'provider', label: 'Provider', type: 'select', required: true, options: PROVIDERS },
          { name: 'customer_kms_key_arn', label: 'Customer key (ARN or name)', required: true },
          { name: 'tenant_key_id', label: 'Tenant key id', required: true, hint: 'Never used before.' },
          { name: 'sla_revoke_propagation_seconds', label: 'Revocation SLA (seconds)', type: 'number', min: 1 },
          { name: 'siem_forwarder_endpoint', label: 'SIEM forwarder endpoint' },
        ],
        onSubmit: async (body) => {
          const b = await data('/admin/byok/bindings', { method: 'POST', body: { ...body, operator_id: operatorId() } });
          draw(b);
          show(status, `${tenantName(tenants, b.tenant_id)} bound to ${b.customer_kms_key_arn}, grant ${b.grant_status}.`);
        },
      })),
  );
  if (ctx.params.get('tenant')) await find(ctx.params.get('tenant'));
}
