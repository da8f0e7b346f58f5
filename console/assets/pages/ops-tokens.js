// Operator tokens: minting one (its token shown once: the hub keeps only
// its SHA-256), revoking one, and the tokens listed by GET
// /admin/security/ops-tokens (each with its state, never its secret),
// filtered by state, a page at a time.
import { api, data } from '../api.js';
import { h, page, section, form, table, button, attempt, show, secret, when } from '../ui.js';
import { operatorId } from '../operator.js';

const PAGE = 50;
const STATES = [['', 'All'], ['active', 'Active'], ['revoked', 'Revoked'], ['expired', 'Expired']];

export async function render(main) {
  const { status } = page(main, 'Operator tokens', 'Database operator tokens sign operators in (header x-admin-ops-token). A revoked or expired token is refused at once on every replica. Revoking the token you signed in with signs you out at your next request.');
  const once = h('div');
  const list = h('div');
  let offset = 0;
  const filterId = 'ops-token-state';
  const filter = h('select', { id: filterId, name: 'status', onchange: () => { offset = 0; load(); } },
    STATES.map(([value, label]) => h('option', { value }, label)));

  async function load() {
    const query = { limit: PAGE, offset };
    if (filter.value) query.status = filter.value;
    const answer = await attempt(status, () => api('/admin/security/ops-tokens', { query }));
    if (!answer) return;
    const rows = answer.data;
    const last = Math.min(offset + rows.length, answer.total);
    list.replaceChildren(
      h('p', {}, answer.total ? `Tokens ${offset + 1} to ${last} of ${answer.total}.` : ''),
      table('Operator tokens', [
        ['Label', 'label'],
        ['Id', 'id'],
        ['State', (t) => (t.status === 'revoked' ? `revoked ${when(t.revoked_at)}` : t.status)],
        ['Minted by', 'minted_by'],
        ['Created by', 'created_by'],
        ['Reason', 'reason'],
        ['Created', (t) => when(t.created_at)],
        ['Expires', (t) => (t.expires_at ? when(t.expires_at) : 'never')],
        ['Action', (t) => (t.status === 'active' ? button('Revoke', () => revoke(t.id, t.label), { class: 'danger', 'aria-label': `Revoke token ${t.label} (${t.id})` }) : '—')],
      ], rows, filter.value ? `No ${filter.value} token.` : 'No token minted yet.'),
      h('div', { class: 'actions' },
        offset > 0 && button('Previous tokens', async () => { offset = Math.max(0, offset - PAGE); await load(); }, { class: 'secondary' }),
        last < answer.total && button('Next tokens', async () => { offset += PAGE; await load(); }, { class: 'secondary' })),
    );
  }

  async function revoke(id, label) {
    const r = await attempt(status, () => data(`/admin/security/ops-tokens/${encodeURIComponent(id)}`, { method: 'DELETE' }));
    if (!r) return;
    await load();
    show(status, `Token ${label ?? r.id} ${r.status}.`);
  }

  main.append(
    section('Mint a token',
      form({
        label: 'Mint an operator token',
        submit: 'Mint',
        fields: [
          { name: 'label', label: 'Label', required: true, hint: 'Who or what will use it.' },
          { name: 'ttl_seconds', label: 'Lifetime in seconds', type: 'number', min: 1, hint: 'Empty: it never expires.' },
          { name: 'reason', label: 'Reason' },
          { name: 'created_by', label: 'Created by', value: operatorId() },
        ],
        onSubmit: async (body) => {
          const t = await data('/admin/security/ops-tokens', { method: 'POST', body });
          once.replaceChildren(secret(`Token ${t.label}`, t.token));
          await load();
          show(status, `Token ${t.label} minted (${t.id}), ${t.expires_at ? `expires ${when(t.expires_at)}` : 'never expires'}.`);
          once.querySelector('input')?.focus();
        },
      }),
      once),
    section('Tokens',
      h('div', { class: 'field' }, h('label', { for: filterId }, 'Show'), filter),
      list,
      form({
        label: 'Revoke a token by id',
        submit: 'Revoke',
        fields: [{ name: 'id', label: 'Token id', required: true }],
        onSubmit: async ({ id }) => revoke(id),
      })),
  );
  await load();
}
