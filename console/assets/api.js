// The console's one way to the hub: the public API, with the signed-in
// credential. The credential lives in this module's memory only (never in
// localStorage, sessionStorage or a cookie): a reload signs out, and no
// cookie means no cross-site request can carry it (no CSRF surface).

/** Who is signed in: kind is 'tenant' (a JWT from /api/auth/login) or 'operator'. */
export const session = { token: null, kind: null, email: null, tenantId: null, tenantName: null };

export function signOut() {
  Object.assign(session, { token: null, kind: null, email: null, tenantId: null, tenantName: null });
}

/** A refused request: the HTTP status and the platform's error envelope. */
export class ApiError extends Error {
  constructor(status, envelope) {
    super(describe(status, envelope));
    this.status = status;
    this.envelope = envelope;
  }
}

/** The envelope in words: its error, its details and, on a 403 for a
 * scope, the permission that is missing. */
export function describe(status, envelope) {
  if (!envelope || typeof envelope !== 'object') return `HTTP ${status}`;
  const details = (envelope.details ?? []).map((d) => (typeof d === 'string' ? d : JSON.stringify(d)));
  let text = `${envelope.error ?? 'Error'} (HTTP ${status})`;
  if (details.length) text += `: ${details.join('; ')}`;
  if (envelope.required_scopes) {
    const granted = new Set(envelope.granted_scopes ?? []);
    const missing = [].concat(envelope.required_scopes).filter((s) => !granted.has(s));
    text += `. Missing permission: ${(missing.length ? missing : [].concat(envelope.required_scopes)).join(', ')}`;
  }
  return text;
}

function url(path, query) {
  if (!query) return path;
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) {
    if (v !== undefined && v !== null && v !== '') params.set(k, v);
  }
  const qs = params.toString();
  return qs ? `${path}?${qs}` : path;
}

/**
 * Calls the hub: `api('/api/flags', { method: 'POST', body: {...} })`.
 * Answers the parsed JSON (the envelope: its `data` is the resource);
 * throws ApiError with the envelope when the status is not 2xx.
 */
export async function api(path, { method = 'GET', body, query, token = session.token, kind = session.kind, accept = 'application/json' } = {}) {
  const headers = { accept };
  // An operator's token travels in its own header (operator-interface.md,
  // "Authentication"); every other credential is a bearer.
  if (token && kind === 'operator') headers['x-admin-ops-token'] = token;
  else if (token) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(url(path, query), {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: 'omit',
    cache: 'no-store',
  });
  const text = await response.text();
  let parsed = text;
  if ((response.headers.get('content-type') ?? '').includes('json') && text) {
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = text;
    }
  }
  if (!response.ok) throw new ApiError(response.status, typeof parsed === 'object' ? parsed : { error: String(parsed).slice(0, 200) });
  return parsed;
}

/** The `data` of an answer (a list answer's array). */
export async function data(path, options) {
  return (await api(path, options)).data;
}

/**
 * Reads a server-sent event stream with fetch (EventSource cannot send the
 * Authorization header) and calls onEvent({ event, data, id }) per event
 * until `signal` aborts it or the hub ends the stream. `token` is the
 * signed-in credential unless given (a robot's stream takes the robot's).
 */
export async function stream(path, onEvent, { signal, token = session.token } = {}) {
  const response = await fetch(path, {
    headers: { accept: 'text/event-stream', authorization: `Bearer ${token}` },
    credentials: 'omit',
    cache: 'no-store',
    signal,
  });
  if (!response.ok) {
    let envelope;
    try {
      envelope = await response.json();
    } catch {
      envelope = undefined;
    }
    throw new ApiError(response.status, envelope);
  }
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value.replace(/\r\n?/g, '\n');
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const event = { event: 'message', data: '', id: null };
      const lines = [];
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        const content = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'data') lines.push(content);
        else if (field === 'event') event.event = content;
        else if (field === 'id') event.id = content;
      }
      if (lines.length) {
        event.data = lines.join('\n');
        onEvent(event);
      }
    }
  }
}

/** The claims of a JWT (read for display only; the hub checks it). */
export function claims(token) {
  try {
    const part = token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
    return JSON.parse(atob(part.padEnd(part.length + ((4 - (part.length % 4)) % 4), '=')));
  } catch {
    return {};
  }
}
