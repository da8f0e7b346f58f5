// Feature flags: create, add rollouts (a share of the stickiness values,
// with constraints), the kill switch, and a "who gets what" evaluator
// that evaluates a flag for a list of personas.
import { data } from '../api.js';
import { h, page, section, form, table, button, show, attempt, when, text } from '../ui.js';

function samples(n) {
  return Array.from({ length: n }, () => crypto.randomUUID()).join('\n');
}

export async function render(main, ctx) {
  const { status } = page(main, 'Feature flags', 'A flag answers its default value, or the value of the first active rollout whose constraints hold and whose percentage admits the context; the kill switch makes it answer its off value to everyone.');
  const list = h('div');
  const detail = h('div', {}, h('p', { class: 'empty' }, 'Open a flag to see its rollouts, add one, use its kill switch or evaluate it.'));
  let selected = ctx.params.get('flag');

  async function loadList() {
    const flags = await attempt(status, () => data('/api/feature-flags', { query: { limit: 200 } }));
    if (!flags) return;
    list.replaceChildren(
      table('Flags', [
        ['Key', 'flag_key'],
        ['Layer', 'layer'],
        ['Default', (f) => text(f.default_value)],
        ['Off value', (f) => text(f.off_value)],
        ['Kill switch', (f) => (f.kill_switch_engaged ? `engaged${f.kill_switch_reason ? `: ${f.kill_switch_reason}` : ''}` : 'off')],
        ['Updated', (f) => when(f.updated_at)],
        ['Action', (f) => button('Open', async () => {
          selected = f.flag_key;
          await loadDetail();
          detail.querySelector('h3')?.focus();
        }, { class: 'secondary', 'aria-label': `Open ${f.flag_key}` })],
      ], flags, 'No flag yet.'),
    );
    if (selected) await loadDetail();
  }

  async function loadDetail() {
    const d = await attempt(status, () => data(`/api/feature-flags/${encodeURIComponent(selected)}`));
    if (!d) return;
    // The flag's fields, with its rollouts beside them.
    const { rollouts, ...flag } = d;
    const key = encodeURIComponent(flag.flag_key);
    const results = h('div', { 'aria-live': 'polite' });
    detail.replaceChildren(
      h('h3', { tabindex: '-1' }, `Flag ${flag.flag_key}`),
      h('p', {}, flag.description ?? ''),
      table(`Rollouts of ${flag.flag_key}`, [
        ['Priority', 'priority'],
        ['Percentage', (r) => `${r.percentage}%`],
        ['Stickiness', 'stickiness'],
        ['Constraints', (r) => text(r.predicate)],
        ['Value', (r) => text(r.value)],
        ['Active', (r) => (r.active ? 'yes' : 'no')],
      ], rollouts, 'No rollout: everyone gets the default value.'),
      h('div', { class: 'actions' },
        flag.kill_switch_engaged
          ? button(`Release the kill switch of ${flag.flag_key}`, () => kill(key, false))
          : button(`Engage the kill switch of ${flag.flag_key}`, () => kill(key, true), { class: 'danger' })),
      form({
        label: `Add a rollout to ${flag.flag_key}`,
        submit: 'Add rollout',
        fields: [
          { name: 'percentage', label: 'Percentage (0–100)', type: 'number', min: 0, max: 100, required: true, value: 50 },
          { name: 'value', label: 'Value when admitted (JSON)', json: true, value: 'true', hint: 'Any JSON: true, "blue", {"limit": 5}.' },
          { name: 'stickiness', label: 'Stickiness', value: 'persona_id', hint: 'persona_id, tenant_id, bu_id or attributes.<name>.' },
          { name: 'priority', label: 'Priority (lower first)', type: 'number', min: 0 },
          { name: 'predicate', label: 'Constraints (JSON array, optional)', type: 'textarea', rows: 2, json: true, hint: 'e.g. [{"context_name": "attributes.country", "operator": "in", "values": ["FR"]}]' },
        ],
        onSubmit: async (body) => {
          await data(`/api/feature-flags/${key}/rollouts`, { method: 'POST', body });
          show(status, `Rollout of ${body.percentage}% added to ${flag.flag_key}.`);
          await loadList();
        },
      }),
      h('h3', {}, 'Who gets what'),
      form({
        label: `Evaluate ${flag.flag_key}`,
        submit: 'Evaluate',
        fields: [
          { name: 'personas', label: 'Persona ids (one per line)', type: 'textarea', rows: 5, list: true, required: true, value: samples(20), hint: 'Twenty random ids to start with; the share admitted approaches the percentage as the list grows.' },
          { name: 'attributes', label: 'Attributes (JSON object, optional)', json: true, placeholder: '{"country": "FR"}' },
        ],
        onSubmit: async ({ personas, attributes }) => {
          const rows = [];
          for (const persona_id of personas) {
            const body = attributes ? { persona_id, attributes } : { persona_id };
            rows.push({ persona_id, ...(await data(`/api/feature-flags/${key}/evaluate`, { method: 'POST', body })) });
          }
          const tally = new Map();
          for (const r of rows) tally.set(text(r.resolved_value), (tally.get(text(r.resolved_value)) ?? 0) + 1);
          results.replaceChildren(
            h('p', { class: 'tally' }, `${rows.length} evaluated: ${[...tally].map(([v, n]) => `${v} for ${n}`).join(', ')}.`),
            table(`Evaluations of ${flag.flag_key}`, [
              ['Persona', 'persona_id'],
              ['Value', (r) => text(r.resolved_value)],
              ['Reason', 'reason'],
              ['Rollout', 'matched_rollout_id'],
            ], rows),
          );
        },
      }),
      results,
    );
  }

  async function kill(key, engaged) {
    const body = engaged ? { engaged, reason: 'engaged from the console' } : { engaged };
    if (await attempt(status, () => data(`/api/feature-flags/${key}/kill-switch`, { method: 'POST', body }), engaged ? 'Kill switch engaged.' : 'Kill switch released.')) await loadList();
  }

  main.append(
    section('Flags', list, form({
      label: 'Create a flag',
      submit: 'Create flag',
      fields: [
        { name: 'flag_key', label: 'Key', required: true, hint: 'Up to 128 characters, e.g. new-checkout.' },
        { name: 'description', label: 'Description' },
        { name: 'default_value', label: 'Default value (JSON)', json: true, value: 'false' },
        { name: 'off_value', label: 'Off value (JSON, under the kill switch)', json: true, value: 'false' },
      ],
      onSubmit: async (body) => {
        const made = await data('/api/feature-flags', { method: 'POST', body });
        selected = made.flag_key;
        show(status, `Flag ${body.flag_key} created.`);
        await loadList();
      },
    })),
    section('Flag', detail),
  );
  await loadList();
}
