// Robots: assets, their per-robot credentials, commands with their states
// and approvals, and an asset's commands live: the read-only observer
// stream GET /api/commands/watch, with the signed-in admin's credential
// (read here with fetch since EventSource cannot send an Authorization
// header). Watching changes nothing: the robot's own stream still delivers.
import { data, stream } from '../api.js';
import { h, page, section, form, table, button, secret, show, attempt, when, text } from '../ui.js';

const STATES = ['awaiting_approval', 'queued', 'delivered', 'acknowledged_ok', 'acknowledged_failed', 'rejected', 'expired', 'cancelled'];

export async function render(main, ctx) {
  const { status } = page(main, 'Robots', 'Assets (robots) receive commands over QUIC or the SSE stream with their own credential; high and critical commands wait for a person’s approval.');
  const assets = h('div');
  const asset = h('div');
  const commands = h('div');
  const shown = h('div', { 'aria-live': 'polite' });
  const live = h('ol', { class: 'live', 'aria-label': 'Live command stream', 'aria-live': 'polite' });
  let selected = ctx.params.get('asset');
  let commandFilter = {};
  let watching = null;

  async function loadAssets() {
    const list = await attempt(status, () => data('/api/assets', { query: { limit: 200 } }));
    if (!list) return;
    assets.replaceChildren(
      table('Assets', [
        ['Name', 'display_name'],
        ['Model', 'model'],
        ['Status', 'status'],
        ['Components', (a) => text(a.components)],
        ['Created', (a) => when(a.created_at)],
        ['Action', (a) => button('Open', async () => {
          selected = a.asset_id;
          await loadAsset();
          asset.querySelector('h3')?.focus();
        }, { class: 'secondary', 'aria-label': `Open ${a.display_name}` })],
      ], list, 'No asset yet.'),
    );
    if (selected) await loadAsset();
  }

  async function loadAsset() {
    const a = await attempt(status, () => data(`/api/assets/${selected}`));
    const creds = await attempt(status, () => data(`/api/assets/${selected}/credentials`, { query: { limit: 100 } }));
    if (!a || !creds) return;
    asset.replaceChildren(
      h('h3', { tabindex: '-1' }, `${a.display_name} (${a.asset_id})`),
      table(`Credentials of ${a.display_name}`, [
        ['Ends in', 'last4'],
        ['Status', 'status'],
        ['Expires', (c) => when(c.expires_at)],
        ['Created', (c) => when(c.created_at)],
        ['Action', (c) => (c.status === 'active'
          ? button(`Revoke …${c.last4}`, async () => {
            if (await attempt(status, () => data(`/api/assets/${a.asset_id}/credentials/${c.credential_id}/revoke`, { method: 'POST' }), 'Credential revoked.')) await loadAsset();
          }, { class: 'danger' })
          : '—')],
      ], creds, 'No credential yet.'),
      h('div', { class: 'actions' },
        button(`Issue a credential for ${a.display_name}`, async () => {
          const c = await attempt(status, () => data(`/api/assets/${a.asset_id}/credentials`, { method: 'POST', body: {} }), 'Credential issued.');
          if (!c) return;
          await loadAsset();
          shown.replaceChildren(secret(`Credential of ${a.display_name}`, c.credential));
        })),
      h('h3', {}, 'Live commands'),
      form({
        label: `Watch the commands of ${a.display_name}`,
        submit: 'Watch live',
        fields: [],
        onSubmit: async () => watch(a.asset_id),
      }),
      live,
    );
  }

  function watch(assetId) {
    watching?.abort();
    watching = new AbortController();
    live.replaceChildren(h('li', {}, `${when(new Date().toISOString())} connecting…`));
    // The observer stream, with the admin's own credential: it reads and
    // never marks a command delivered (the robot's stream does that).
    const reading = stream(`/api/commands/watch?asset_id=${encodeURIComponent(assetId)}`, (event) => {
      let line = event.data;
      try {
        const c = JSON.parse(event.data);
        line = `${c.type} (${c.risk_class}) ${c.status}${c.seq == null ? '' : ` #${c.seq}`} ${JSON.stringify(c.params)}`;
      } catch {
        // not JSON: shown as it came
      }
      live.append(h('li', {}, `${when(new Date().toISOString())} ${event.event}: ${line}`));
      live.scrollTop = live.scrollHeight;
      loadCommands();
    }, { signal: watching.signal });
    live.append(h('li', {}, `${when(new Date().toISOString())} watching: the commands not yet finished, then each change of state.`));
    const current = watching;
    reading
      .then(() => {
        // The hub ends an observer stream after a while (its credential is
        // checked again on reconnecting): watch again unless the user left.
        live.append(h('li', {}, 'The hub ended the stream: reconnecting.'));
        setTimeout(() => {
          if (watching === current && !current.signal.aborted) watch(assetId);
        }, 1000);
      })
      .catch((e) => {
        if (e.name !== 'AbortError') live.append(h('li', {}, `Stream closed: ${e.message}`));
      });
  }

  async function loadCommands() {
    const list = await attempt(status, () => data('/api/commands', { query: { limit: 50, ...commandFilter } }));
    if (!list) return;
    commands.replaceChildren(
      table('Commands', [
        ['Type', 'type'],
        ['Asset', 'target_asset_id'],
        ['Risk', 'risk_class'],
        ['State', 'status'],
        ['Approval', (c) => (c.decision ? `${c.decision.approved ? 'approved' : 'rejected'} by ${c.decision.decided_by ?? '—'}` : c.risk_class === 'high' || c.risk_class === 'critical' ? 'needed' : 'not needed')],
        ['Acknowledged', (c) => (c.ack ? `${c.ack.ok ? 'ok' : 'failed'}${c.ack.message ? `: ${c.ack.message}` : ''}` : '—')],
        ['Expires', (c) => when(c.expires_at)],
        ['Actions', (c) => h('div', { class: 'actions' },
          c.status === 'awaiting_approval' && button(`Approve ${c.type}`, () => decide(c, true)),
          c.status === 'awaiting_approval' && button(`Reject ${c.type}`, () => decide(c, false), { class: 'danger' }),
          ['awaiting_approval', 'queued'].includes(c.status) && button(`Cancel ${c.type}`, async () => {
            if (await attempt(status, () => data(`/api/commands/${c.command_id}/cancel`, { method: 'POST', body: {} }), 'Command cancelled.')) await loadCommands();
          }, { class: 'secondary' }))],
      ], list, 'No command.'),
    );
  }

  async function decide(c, approved) {
    const body = { approved, reason: approved ? 'approved in the console' : 'rejected in the console' };
    if (await attempt(status, () => data(`/api/commands/${c.command_id}/decision`, { method: 'POST', body }), approved ? 'Command approved: queued.' : 'Command rejected.')) await loadCommands();
  }

  main.append(
    shown,
    section('Assets', assets, form({
      label: 'Add an asset',
      submit: 'Add asset',
      fields: [
        { name: 'display_name', label: 'Name', required: true },
        { name: 'model', label: 'Model' },
        { name: 'components', label: 'Components (optional)', list: true, hint: 'Component ids, separated by spaces or commas.' },
      ],
      onSubmit: async (body) => {
        const made = await data('/api/assets', { method: 'POST', body });
        selected = made.asset_id;
        show(status, `Asset ${made.display_name} added.`);
        await loadAssets();
      },
    }), asset),
    section('Commands',
      form({
        label: 'Send a command',
        submit: 'Send command',
        fields: [
          { name: 'target_asset_id', label: 'Asset id', required: true, value: selected ?? '' },
          { name: 'type', label: 'Type', required: true, placeholder: 'e.g. move' },
          { name: 'risk_class', label: 'Risk', type: 'select', options: ['low', 'medium', 'high', 'critical'], value: 'low', hint: 'High and critical wait for approval.' },
          { name: 'params', label: 'Parameters (JSON object, optional)', json: true, placeholder: '{"x": 1}' },
        ],
        onSubmit: async (body) => {
          const c = await data('/api/commands', { method: 'POST', body });
          show(status, `Command ${c.type}: ${c.status}.`);
          await loadCommands();
        },
      }),
      form({
        label: 'Filter commands',
        submit: 'Show commands',
        fields: [{ name: 'status', label: 'State', type: 'select', options: [['', 'any'], ...STATES] }],
        onSubmit: async (values) => {
          commandFilter = values;
          await loadCommands();
        },
      }),
      commands),
  );
  // The asset id field follows the opened asset.
  const assetField = main.querySelector('input[name="target_asset_id"]');
  const follow = new MutationObserver(() => {
    if (selected && !assetField.value) assetField.value = selected;
  });
  follow.observe(asset, { childList: true });
  await Promise.all([loadAssets(), loadCommands()]);
  return () => {
    watching?.abort();
    follow.disconnect();
  };
}
