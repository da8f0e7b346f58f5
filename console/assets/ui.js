// The console's one table and form helper, and a tiny element builder.
// Everything is built with DOM calls (no HTML strings), so data from the
// hub is always text, never markup.
import { ApiError } from './api.js';

let unique = 0;
/** A fresh id for label/control pairs. */
export function uid(prefix = 'c') {
  unique += 1;
  return `${prefix}-${unique}`;
}

/** h('p', { class: 'note' }, 'text', child...): an element. Attributes
 * starting with "on" are listeners; `false`/null attributes are skipped. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v === false || v === null || v === undefined) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

/** The page's heading and a status region for its messages. */
export function page(main, title, intro) {
  main.replaceChildren();
  const h1 = h('h1', { tabindex: '-1' }, title);
  main.append(h1);
  if (intro) main.append(h('p', { class: 'intro' }, intro));
  const status = h('div', { class: 'status', role: 'status', 'aria-live': 'polite' });
  main.append(status);
  document.title = `${title} · Console`;
  return { h1, status };
}

/** A titled region of a page. */
export function section(title, ...children) {
  const id = uid('s');
  return h('section', { 'aria-labelledby': id }, h('h2', { id }, title), ...children);
}

/** Shows an error (or a success message) in a status region. A refused
 * request shows the envelope's words, the missing permission included. */
export function show(status, what, kind) {
  const isError = what instanceof Error;
  const text = isError ? what.message : String(what);
  const cls = kind ?? (isError ? 'error' : 'ok');
  status.replaceChildren(h('p', { class: `message ${cls}`, role: cls === 'error' ? 'alert' : null }, text));
  if (isError && !(what instanceof ApiError)) console.error(what);
}

/** Runs an action, reporting its failure in `status`; answers its result
 * or undefined when it failed. */
export async function attempt(status, action, success) {
  try {
    const result = await action();
    if (success) show(status, typeof success === 'function' ? success(result) : success);
    return result;
  } catch (e) {
    show(status, e);
    return undefined;
  }
}

/** A cell's text for any JSON value. */
export function text(value) {
  if (value === null || value === undefined) return '—';
  if (Array.isArray(value)) return value.map(text).join(', ');
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value);
}

/**
 * A table: columns are [header, key-or-function]; a function receives the
 * row and may answer a Node (a button, say) or a value.
 */
export function table(caption, columns, rows, empty = 'Nothing yet.') {
  if (!rows || rows.length === 0) return h('p', { class: 'empty' }, empty);
  const head = h('tr', {}, columns.map(([title]) => h('th', { scope: 'col' }, title)));
  const body = rows.map((row) =>
    h(
      'tr',
      {},
      columns.map(([, key]) => {
        const v = typeof key === 'function' ? key(row) : row[key];
        return h('td', {}, v instanceof Node ? v : text(v));
      }),
    ),
  );
  return h('div', { class: 'table-wrap', tabindex: '0', role: 'region', 'aria-label': `${caption} table` }, h('table', {}, h('caption', {}, caption), h('thead', {}, head), h('tbody', {}, body)));
}

/**
 * A form: fields are { name, label, type ('text', 'email', 'password',
 * 'number', 'select', 'textarea', 'checkbox', 'datetime-local'), options
 * (for select: [value, label] or value), value, required, hint, ... }.
 * onSubmit(values, form) runs on submit; its error shows under the form.
 * Answers the <form>.
 */
export function form({ label, fields, submit, onSubmit, status }) {
  const own = status ?? h('div', { class: 'form-status', role: 'status', 'aria-live': 'polite' });
  const titleId = uid('form');
  const f = h('form', { class: 'form', 'aria-labelledby': titleId }, h('h3', { id: titleId, class: 'form-title' }, label));
  for (const field of fields) f.append(control(field));
  const button = h('button', { type: 'submit' }, submit);
  f.append(h('div', { class: 'actions' }, button));
  if (!status) f.append(own);
  f.addEventListener('submit', async (event) => {
    event.preventDefault();
    button.disabled = true;
    try {
      await onSubmit(values(f, fields), f);
    } catch (e) {
      show(own, e);
    } finally {
      button.disabled = false;
    }
  });
  return f;
}

function control(field) {
  const id = uid('f');
  const hintId = field.hint ? `${id}-hint` : null;
  const common = { id, name: field.name, required: field.required ?? false, 'aria-describedby': hintId };
  let input;
  if (field.type === 'select') {
    input = h(
      'select',
      common,
      (field.options ?? []).map((o) => {
        const [value, label] = Array.isArray(o) ? o : [o, o];
        return h('option', { value, selected: String(field.value ?? '') === String(value) }, label);
      }),
    );
  } else if (field.type === 'textarea') {
    input = h('textarea', { ...common, rows: field.rows ?? 4 }, field.value ?? '');
  } else if (field.type === 'checkbox') {
    input = h('input', { ...common, type: 'checkbox', checked: field.value ?? false });
    return h('div', { class: 'field check' }, input, h('label', { for: id }, field.label), hintId && h('p', { id: hintId, class: 'hint' }, field.hint));
  } else {
    input = h('input', {
      ...common,
      type: field.type ?? 'text',
      value: field.value ?? null,
      autocomplete: field.autocomplete ?? 'off',
      min: field.min ?? null,
      max: field.max ?? null,
      step: field.step ?? null,
      minlength: field.minlength ?? null,
      placeholder: field.placeholder ?? null,
    });
  }
  return h('div', { class: 'field' }, h('label', { for: id }, field.label), input, hintId && h('p', { id: hintId, class: 'hint' }, field.hint));
}

/** The form's values by field name: numbers as numbers, checkboxes as
 * booleans, empty optional fields left out, `list: true` fields split on
 * commas or whitespace, `json: true` fields parsed. */
export function values(f, fields) {
  const out = {};
  for (const field of fields) {
    const el = f.elements.namedItem(field.name);
    if (field.type === 'checkbox') {
      out[field.name] = el.checked;
      continue;
    }
    const raw = el.value.trim();
    if (raw === '' && !field.required) continue;
    if (field.type === 'number') out[field.name] = Number(raw);
    else if (field.list) out[field.name] = raw.split(/[\s,]+/).filter(Boolean);
    else if (field.json) out[field.name] = JSON.parse(raw);
    else if (field.type === 'datetime-local') out[field.name] = new Date(raw).toISOString();
    else out[field.name] = raw;
  }
  return out;
}

/** A real button that runs `action` (disabled while it runs). */
export function button(label, action, attrs = {}) {
  const b = h('button', { type: 'button', ...attrs }, label);
  b.addEventListener('click', async () => {
    b.disabled = true;
    try {
      await action();
    } finally {
      b.disabled = false;
    }
  });
  return b;
}

/** A secret shown once: its value in a read-only field with a copy button. */
export function secret(label, value) {
  const id = uid('secret');
  const input = h('input', { id, type: 'text', readonly: true, value, class: 'secret', spellcheck: 'false' });
  return h(
    'div',
    { class: 'once', role: 'note' },
    h('label', { for: id }, label),
    input,
    h('p', { class: 'hint' }, 'Shown once: copy it now. The hub keeps only its hash.'),
    button('Copy', async () => navigator.clipboard?.writeText(value)),
  );
}

/** Short date-time for a table. */
export function when(value) {
  if (!value) return '—';
  const d = new Date(value);
  return Number.isNaN(d.getTime()) ? String(value) : d.toISOString().replace('T', ' ').slice(0, 19);
}
