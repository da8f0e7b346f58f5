// A user's first steps with the generated TypeScript client
// (platform-hub-client, from clients/generate.sh), imported by its package
// name as an application would: sign up a tenant, issue an API key with
// scopes, create a CRM contact with the key and read it back, and receive
// the contact's webhook on a receiver this script runs on loopback, its
// Standard Webhooks signature checked with the official `standardwebhooks`
// package.
//
// Usage: node story-build/story.js HUB_URL   (a hub in development mode: it
// delivers webhooks to loopback addresses). Compiled with tsc --strict by
// clients/run.sh (tsconfig.story.json). Exits non-zero naming the first
// mismatch.
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';

import { Webhook, WebhookVerificationError } from 'standardwebhooks';

import {
  sdkApiKeysIssueForTenant,
  sdkCrmCreateContact,
  sdkCrmGetContact,
  sdkIdentitySignupTenant,
  sdkWebhookCreateEndpoint,
} from 'platform-hub-client';
import { createClient, createConfig } from 'platform-hub-client/client';

const WEBHOOK_WAIT_MS = 20_000;
const SCOPES = ['crm.contact.read', 'crm.contact.write', 'webhook.endpoint.write'];

class Mismatch extends Error {}

function check(condition: boolean, message: string): asserts condition {
  if (!condition) {
    throw new Mismatch(message);
  }
}

/** What every generated function answers (its `fields` response style). */
type Result<D, E> = ({ data: D; error: undefined } | { data: undefined; error: E }) & { response: Response };

/** The data of a generated call, whose answer must have `status`. */
async function answer<D, E>(step: string, call: Promise<Result<D, E>>, status: number): Promise<D> {
  const result = await call;
  if (result.response.status !== status || result.data === undefined) {
    const body = JSON.stringify(result.error ?? result.data).slice(0, 500);
    throw new Mismatch(`${step}: expected ${status}, got ${result.response.status} ${body}`);
  }
  return result.data;
}

interface Delivery {
  headers: Record<string, string>;
  body: string;
}

/** A receiver on loopback: the first POST it gets (answered 204). */
async function receiver(): Promise<{ url: string; first: Promise<Delivery>; close: () => void }> {
  let deliver: (delivery: Delivery) => void = () => {};
  const first = new Promise<Delivery>((resolve) => {
    deliver = resolve;
  });
  const server = createServer((req: IncomingMessage, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      res.writeHead(204).end();
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(req.headers)) {
        if (typeof value === 'string') {
          headers[name] = value;
        }
      }
      deliver({ headers, body: Buffer.concat(chunks).toString('utf8') });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/hook`, first, close: () => server.close() };
}

function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Mismatch(`${what} within ${ms / 1000} s`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** The Standard Webhooks message the hub sends. */
interface HubMessage {
  type: string;
  tenant_id: string;
  data: { contact_id?: unknown };
}

function isHubMessage(value: unknown): value is HubMessage {
  if (typeof value !== 'object' || value === null) {
    return false;
  }
  const v = value as Record<string, unknown>;
  return typeof v.type === 'string' && typeof v.tenant_id === 'string' && typeof v.data === 'object' && v.data !== null;
}

async function story(base: string): Promise<string> {
  const hook = await receiver();
  try {
    // 1. Sign up a tenant: the owner's token comes back.
    const unique = randomBytes(4).toString('hex');
    const anonymous = createClient(createConfig({ baseUrl: base }));
    const { data: tenant } = await answer(
      'sign-up',
      sdkIdentitySignupTenant({
        client: anonymous,
        body: {
          email: `ts-${unique}@example.com`,
          password: 'correct horse battery',
          org_name: 'TypeScript story',
          app_id: `ts-story-${unique}`,
          display_name: 'Ts',
          region: 'eu-west-1',
        },
      }),
      201,
    );
    check(tenant.status === 'trial', `sign-up: status ${tenant.status}, expected trial`);
    const owner = createClient(createConfig({ baseUrl: base, auth: tenant.token }));

    // 2. Issue an API key with the scopes the rest needs.
    const { data: key } = await answer(
      'issue key',
      sdkApiKeysIssueForTenant({ client: owner, body: { tenant_id: tenant.tenant_id, name: 'typescript story', scopes: SCOPES } }),
      201,
    );
    check(key.api_key.startsWith('pk_live_'), `issue key: secret ${key.api_key.slice(0, 8)}…, expected pk_live_…`);
    check([...key.scopes].sort().join() === [...SCOPES].sort().join(), `issue key: scopes ${key.scopes}, expected ${SCOPES}`);
    check(key.tenant_id === tenant.tenant_id, `issue key: tenant ${key.tenant_id}, expected ${tenant.tenant_id}`);
    const api = createClient(createConfig({ baseUrl: base, auth: key.api_key }));

    // 3. With the key: a webhook endpoint on this script's receiver.
    const { data: endpoint } = await answer(
      'webhook endpoint',
      sdkWebhookCreateEndpoint({
        client: api,
        body: { url: hook.url, event_types: ['crm.contact.created.v1'], description: 'typescript story' },
      }),
      201,
    );
    check(endpoint.url === hook.url && endpoint.status === 'active', `webhook endpoint: ${endpoint.url} ${endpoint.status}`);
    check(endpoint.secret.startsWith('whsec_'), 'webhook endpoint: the secret is not whsec_…');

    // 4. With the key: a contact, then read back.
    const { data: made } = await answer(
      'create contact',
      sdkCrmCreateContact({
        client: api,
        body: { name: 'Grace Hopper', emails: ['Grace@Example.com'], company: 'Eckert-Mauchly' },
      }),
      201,
    );
    check(made.name === 'Grace Hopper', `create contact: name ${made.name}`);
    check(made.emails.join() === 'grace@example.com', `create contact: emails ${made.emails}, expected the address lowercased`);
    check(made.created_by === key.synthetic_persona_id, `create contact: created_by ${made.created_by}, expected the key's persona ${key.synthetic_persona_id}`);
    const { data: read } = await answer('read contact', sdkCrmGetContact({ client: api, path: { contact_id: made.contact_id } }), 200);
    check(
      read.contact_id === made.contact_id && read.name === 'Grace Hopper' && read.emails.join() === 'grace@example.com' && read.company === 'Eckert-Mauchly',
      `read contact: ${JSON.stringify(read)} differs from what was created`,
    );
    // Without a credential the same read is a typed refusal.
    const refused = await sdkCrmGetContact({ client: anonymous, path: { contact_id: made.contact_id } });
    check(refused.response.status === 401 && refused.error?.error === 'Unauthorized', `read contact without a credential: ${refused.response.status} ${JSON.stringify(refused.error)}`);

    // 5. The contact's event arrives at the receiver, signed.
    const delivery = await within(hook.first, WEBHOOK_WAIT_MS, `webhook: nothing arrived at ${hook.url}`);
    let message: unknown;
    try {
      message = new Webhook(endpoint.secret).verify(delivery.body, delivery.headers);
    } catch (e) {
      if (e instanceof WebhookVerificationError) {
        throw new Mismatch(`webhook: the signature does not verify (${e.message}); headers ${JSON.stringify(delivery.headers)}`);
      }
      throw e;
    }
    check(isHubMessage(message), `webhook: not a hub message: ${delivery.body.slice(0, 500)}`);
    check(message.type === 'crm.contact.created.v1', `webhook: type ${message.type}, expected crm.contact.created.v1`);
    check(message.tenant_id === tenant.tenant_id, `webhook: tenant ${message.tenant_id}, expected ${tenant.tenant_id}`);
    check(message.data.contact_id === made.contact_id, `webhook: data ${JSON.stringify(message.data)}, expected contact ${made.contact_id}`);
    return `tenant ${tenant.tenant_id}, contact ${made.contact_id}, webhook ${delivery.headers['webhook-id']} verified`;
  } finally {
    hook.close();
  }
}

const base = process.argv[2];
if (process.argv.length !== 3 || base === undefined) {
  console.error('usage: node story-build/story.js HUB_URL');
  process.exit(2);
}
story(base.replace(/\/+$/, '')).then(
  (summary) => console.log(`typescript story: ok (${summary})`),
  (e: unknown) => {
    console.error(`typescript story: FAILED: ${e instanceof Mismatch ? e.message : e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
    process.exit(1);
  },
);
