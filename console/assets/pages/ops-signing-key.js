// The signing-key rotation: rotating the key that signs the hub's tokens
// now (POST /admin/security/rotate-signing-key), and the rotations the
// platform chain records (security.signing_key.rotated.v1).
import { data } from '../api.js';
import { h, page, section, form, table, attempt, show, when, text } from '../ui.js';
import { operatorId, platformEvents } from '../operator.js';

export async function render(main) {
  const { status } = page(main, 'Signing key', 'Rotating makes a new key sign every token from now on; the retired key still verifies for the grace window (the human token lifetime), so no signed-in user is signed out. Every rotation rotates again.');
  const result = h('div', { 'aria-live': 'polite' });
  const list = h('div');

  async function load() {
    const events = await attempt(status, () => platformEvents('security.signing_key.rotated', 50));
    if (!events) return;
    list.replaceChildren(table('Rotations in the platform chain', [
      ['Rotated', (e) => when(e.occurred_at)],
      ['By', (e) => `${e.actor_id} (actor id ${text(e.payload?.actor_id)})`],
      ['Reason', (e) => text(e.payload?.reason)],
      ['Current key', (e) => text(e.payload?.fingerprint_current)],
      ['Previous key', (e) => text(e.payload?.fingerprint_previous)],
    ], events, 'No rotation yet.'));
  }

  main.append(
    section('Rotate now',
      form({
        label: 'Rotate the signing key',
        submit: 'Rotate',
        fields: [
          { name: 'reason', label: 'Reason', value: 'manual emergency rotation' },
          { name: 'actor_id', label: 'Actor id', value: operatorId() },
        ],
        onSubmit: async (body) => {
          const r = await data('/admin/security/rotate-signing-key', { method: 'POST', body });
          result.replaceChildren(h('dl', { class: 'facts' },
            h('dt', {}, 'Rotated at'), h('dd', {}, when(r.rotated_at)),
            h('dt', {}, 'Current key'), h('dd', {}, r.fingerprint_current),
            h('dt', {}, 'Previous key'), h('dd', {}, text(r.fingerprint_previous)),
            h('dt', {}, 'Grace window'), h('dd', {}, `${Math.round(r.grace_window_ms / 1000)} s`),
            h('dt', {}, 'Emergency'), h('dd', {}, r.emergency ? 'yes' : 'no')));
          await load();
          show(status, `Signing key rotated: now ${r.fingerprint_current}.`);
        },
      }),
      result),
    section('Rotations', list),
  );
  await load();
}
