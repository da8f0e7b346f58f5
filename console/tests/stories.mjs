// The console's browser stories: the real console, served by a real hub,
// driven in headless Chromium (Debian's chromium through playwright-core),
// each page scanned by axe-core (no serious or critical violation) and
// screenshot at desktop and phone width.
//
// Usage: node stories.mjs HUB_URL ARTEFACT_DIR   (a hub in development
// mode: it delivers webhooks to loopback). CHROMIUM names the browser
// (default /usr/bin/chromium). Prints each page's load time and ends with
// `console stories: N passed, M failed`; exits 1 unless M is 0.
import { randomBytes, createHash } from 'node:crypto';
import { mkdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import { join } from 'node:path';

import { chromium } from 'playwright-core';

const require = createRequire(import.meta.url);
const AXE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
const [base, artefacts] = process.argv.slice(2);
if (!base || !artefacts) {
  console.error('usage: node stories.mjs HUB_URL ARTEFACT_DIR');
  process.exit(2);
}
mkdirSync(artefacts, { recursive: true });
const origin = new URL(base).origin;
const unique = randomBytes(4).toString('hex');
const owner = { email: `console-${unique}@example.com`, password: 'correct horse battery', org: `Console ${unique}`, app: `console-${unique}` };
const TIMEOUT = 20_000;

class Mismatch extends Error {}
function check(condition, message) {
  if (!condition) throw new Mismatch(message);
}

// ---- the browser -------------------------------------------------------
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium', args: ['--no-sandbox'] });
const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
const page = await context.newPage();
page.setDefaultTimeout(TIMEOUT);
const problems = [];
// Every request the console makes goes to the hub, and nothing breaks its policy.
page.on('request', (r) => {
  const u = new URL(r.url());
  if (u.protocol !== 'data:' && u.origin !== origin) problems.push(`a request to another host: ${r.url()}`);
});
page.on('console', (m) => {
  if (m.type() === 'error' && /Content Security Policy|Refused to/i.test(m.text())) problems.push(`CSP: ${m.text()}`);
});
page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));

/** Opens a console page by its hash route; answers the milliseconds until it rendered. */
async function open(path, query = '') {
  const started = Date.now();
  if (!page.url().startsWith(`${base}/console`)) await page.goto(`${base}/console#/${path}`);
  // A fresh hash each time, so that the page renders anew even when it is the current one.
  else await page.evaluate(([p, q]) => { location.hash = `#/${p}?${q}${q ? '&' : ''}at=${Date.now()}`; }, [path, query]);
  // Set once the page's render (its API calls included) has finished.
  await page.waitForSelector(`main[data-page="${path}"]`);
  return Date.now() - started;
}

const loads = [];
/** The first load of /console: the HTML, the stylesheet and the modules, to the rendered sign-in page. */
let coldMs;
const scans = [];
/** Screenshots (desktop and 375 px), scans with axe-core, records the load time. */
async function visit(path, query) {
  const ms = await open(path, query);
  const rendered = Number(await page.getAttribute('main', 'data-load-ms'));
  const h1s = await page.locator('h1').count();
  check(h1s === 1, `${path}: ${h1s} h1 elements, expected one`);
  // axe-core evaluated through the DevTools protocol (the page's policy
  // rightly refuses an injected <script>).
  await page.evaluate(AXE);
  const result = await page.evaluate(async () => {
    // eslint-disable-next-line no-undef
    const r = await axe.run(document, { resultTypes: ['violations'] });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => n.target.join(' ')).slice(0, 3) }));
  });
  const serious = result.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  scans.push({ path, violations: result.length, serious: serious.length });
  check(serious.length === 0, `${path}: axe-core found ${serious.map((v) => `${v.impact} ${v.id} (${v.help}) at ${v.nodes.join(', ')}`).join('; ')}`);
  const desktop = join(artefacts, `${path}.png`);
  await page.screenshot({ path: desktop, fullPage: true });
  await page.setViewportSize({ width: 375, height: 800 });
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  const phone = join(artefacts, `${path}-375.png`);
  await page.screenshot({ path: phone, fullPage: true });
  await page.setViewportSize({ width: 1280, height: 900 });
  check(overflow <= 1, `${path}: the page is ${overflow}px wider than a 375px screen`);
  loads.push({ path, ms, rendered, desktop, phone });
}

/** Fills and submits the form named `name` (its aria-label). */
async function submit(name, values) {
  const form = page.getByRole('form', { name, exact: true });
  for (const [label, value] of Object.entries(values)) {
    const field = form.getByLabel(label, { exact: true });
    if ((await field.evaluate((el) => el.tagName)) === 'SELECT') await field.selectOption(value);
    else await field.fill(String(value));
  }
  await form.locator('button[type="submit"]').click();
}

async function message(kind = 'ok') {
  return (await page.locator(`.message.${kind}`).first().textContent({ timeout: TIMEOUT })) ?? '';
}

async function noError(what) {
  const errors = await page.locator('.message.error').allTextContents();
  check(errors.length === 0, `${what}: ${errors.join(' | ')}`);
}

// ---- the stories -------------------------------------------------------
let passed = 0;
let failed = 0;
async function story(name, body) {
  console.log(`-- console: ${name}`);
  try {
    await body();
    passed += 1;
  } catch (e) {
    failed += 1;
    console.error(`-- console: FAILED: ${name}: ${e instanceof Mismatch ? e.message : e.stack}`);
    await page.screenshot({ path: join(artefacts, `failed-${name.replace(/\W+/g, '-')}.png`), fullPage: true }).catch(() => {});
  }
}

await story('the sign-in page loads with its policy, and nothing else is fetched', async () => {
  const started = Date.now();
  const response = await page.goto(`${base}/console`);
  const csp = response.headers()['content-security-policy'] ?? '';
  check(csp.includes("default-src 'none'") && csp.includes("script-src 'self'") && csp.includes("frame-ancestors 'none'"), `CSP: ${csp}`);
  check(response.headers()['x-content-type-options'] === 'nosniff', 'nosniff missing');
  await page.waitForSelector('main[data-page="signin"]');
  coldMs = Date.now() - started;
  // The keyboard: the first Tab reaches the skip link, which moves focus to
  // the content; the next Tabs reach the sign-in form's fields, each with a
  // visible focus ring.
  await page.keyboard.press('Tab');
  check((await page.evaluate(() => document.activeElement.textContent)) === 'Skip to content', 'the first Tab does not reach the skip link');
  await page.keyboard.press('Enter');
  check(await page.evaluate(() => document.activeElement.id === 'main'), 'the skip link does not move focus to the content');
  await page.keyboard.press('Tab');
  const focused = await page.evaluate(() => {
    const el = document.activeElement;
    const style = getComputedStyle(el);
    return { label: el.labels?.[0]?.textContent, outline: style.outlineStyle, width: parseFloat(style.outlineWidth) };
  });
  check(focused.label === 'Email' && focused.outline !== 'none' && focused.width >= 2, `after the skip link, focus is on ${JSON.stringify(focused)}`);
  await visit('signin');
});

await story('sign up a tenant on the page', async () => {
  await submit('Sign up a tenant', {
    Email: owner.email,
    Password: owner.password,
    'Your name': 'Ada',
    Organisation: owner.org,
    'Application id': owner.app,
    Region: 'eu-west-1',
  });
  await page.waitForSelector('main[data-page="overview"]');
  await page.locator('.card').first().waitFor();
  check((await page.textContent('#who'))?.includes(owner.email), 'the header does not name the signed-in admin');
  await noError('overview');
});

await story('sign out, then sign in with email and password', async () => {
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.waitForSelector('main[data-page="signin"]');
  check(!(await page.isVisible('#nav')), 'the navigation is shown to nobody');
  // A page asked for while signed out comes after the sign-in.
  await page.evaluate(() => { location.hash = '#/flags'; });
  await page.waitForSelector('main[data-page="signin"]');
  await submit('Sign in as a tenant admin', { Email: owner.email, Password: owner.password });
  await page.waitForSelector('main[data-page="flags"]');
  // The token is in memory only.
  const stored = await page.evaluate(() => [localStorage.length, sessionStorage.length, document.cookie]);
  check(stored[0] === 0 && stored[1] === 0 && stored[2] === '', `something was stored: ${JSON.stringify(stored)}`);
});

let apiKey;
await story('issue a key on the page and see it work against the API', async () => {
  await open('keys');
  await submit('Create an application', { Name: 'Console story', Slug: 'console-story', Environment: 'live' });
  await page.getByRole('form', { name: 'Issue a key for console-story' }).waitFor();
  await submit('Issue a key for console-story', { 'Key name': 'story key', Scopes: 'me.me.read crm.contact.read' });
  const secret = page.getByLabel('Secret of story key');
  await secret.waitFor();
  apiKey = await secret.inputValue();
  check(apiKey.startsWith('pk_live_'), `the secret shown is ${apiKey.slice(0, 8)}…`);
  const me = await fetch(`${base}/api/me`, { headers: { authorization: `Bearer ${apiKey}` } });
  const body = await me.json();
  check(me.status === 200, `GET /api/me with the key: ${me.status} ${JSON.stringify(body)}`);
  // The key is listed masked, never with its secret.
  await page.getByRole('region', { name: 'Keys of console-story table' }).waitFor();
  const listed = await page.getByRole('region', { name: 'Keys of console-story table' }).textContent();
  check(!listed.includes(apiKey), 'the key list shows the secret');
  await visit('keys');
});

await story('create a webhook endpoint and see a delivery arrive at a local receiver', async () => {
  let arrived;
  const first = new Promise((resolve) => { arrived = resolve; });
  const receiver = createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      res.writeHead(204).end();
      arrived({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
    });
  });
  await new Promise((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${receiver.address().port}/hook`;
  try {
    await open('webhooks');
    await submit('Add an endpoint', { URL: url, 'Event types': 'crm.contact.created.v1', Description: 'console story' });
    const secret = await page.getByLabel(`Signing secret of ${url}`).inputValue();
    check(secret.startsWith('whsec_'), 'no whsec_ secret shown');
    await page.getByRole('button', { name: `Send test to ${url}` }).click();
    let timer;
    const delivery = await Promise.race([first, new Promise((_, reject) => { timer = setTimeout(() => reject(new Mismatch('no delivery within 20 s')), TIMEOUT); })]);
    clearTimeout(timer);
    check(typeof delivery.headers['webhook-signature'] === 'string' && delivery.headers['webhook-signature'].startsWith('v1,'), 'the delivery is not signed');
    check(JSON.parse(delivery.body).type === 'webhook.endpoint.tested.v1', `delivered ${delivery.body.slice(0, 200)}`);
    // The page shows the delivery succeeded, with its attempt.
    await page.waitForTimeout(500);
    await page.getByRole('button', { name: 'Refresh deliveries' }).click();
    await page.getByRole('region', { name: 'Recent deliveries table' }).getByText('succeeded').first().waitFor();
    await visit('webhooks');
  } finally {
    receiver.close();
  }
});

await story('roll a flag out to 50% and evaluate it', async () => {
  await open('flags');
  await submit('Create a flag', { Key: 'new-checkout', 'Default value (JSON)': 'false' });
  await page.getByRole('form', { name: 'Add a rollout to new-checkout' }).waitFor();
  await submit('Add a rollout to new-checkout', { 'Percentage (0–100)': 50, 'Value when admitted (JSON)': 'true' });
  await page.getByRole('region', { name: 'Rollouts of new-checkout table' }).getByText('50%').waitFor();
  // A hundred fixed personas: the same answer on every run.
  const personas = Array.from({ length: 100 }, (_, i) => {
    const hex = createHash('sha256').update(`persona ${i}`).digest('hex');
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-8${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
  });
  await submit('Evaluate new-checkout', { 'Persona ids (one per line)': personas.join('\n') });
  const tally = await page.locator('.tally').textContent({ timeout: 60_000 });
  const on = Number(/true for (\d+)/.exec(tally)?.[1] ?? 0);
  const off = Number(/false for (\d+)/.exec(tally)?.[1] ?? 0);
  check(on + off === 100 && on >= 30 && on <= 70, `50% rollout over 100 personas: ${tally}`);
  // The page's answer is the API's: one persona evaluated directly.
  const direct = await page.evaluate(async (p) => {
    const { data } = await import('/console/api.js');
    return (await data('/api/feature-flags/new-checkout/evaluate', { method: 'POST', body: { persona_id: p } })).resolved_value;
  }, personas[0]);
  const row = await page.getByRole('region', { name: 'Evaluations of new-checkout table' }).locator('tbody tr').first().locator('td').nth(1).textContent();
  check(String(direct) === row, `persona 0: the page says ${row}, the API ${direct}`);
  console.log(`   flag new-checkout at 50%: ${on} of 100 personas get true`);
  await visit('flags', 'flag=new-checkout');
});

await story('the audit chain verifies, showing entries_checked', async () => {
  await open('audit');
  await submit('Verify the chain of a pool', { Pool: 0 });
  const text = await message('ok');
  check(/verified: \d+ entries checked/.test(text), `verdict: ${text}`);
});

await story('robots: commands watched live with the admin\'s credential, delivered and acknowledged by the robot', async () => {
  await open('robots');
  await submit('Add an asset', { Name: 'story robot' });
  await page.getByRole('button', { name: 'Issue a credential for story robot' }).click();
  const credential = await page.getByLabel('Credential of story robot').inputValue();
  const heading = await page.locator('h3', { hasText: 'story robot (' }).textContent();
  const assetId = heading.match(/\(([0-9a-f-]{36})\)/)?.[1];
  check(assetId, `the asset id in: ${heading}`);
  // The page watches with the admin's own token: no robot credential to give.
  check(!(await page.locator('input[name="credential"]').count()), 'the page asks for no robot credential');
  await page.getByRole('form', { name: 'Watch the commands of story robot' }).locator('button[type="submit"]').click();
  await page.locator('ol.live li', { hasText: 'watching:' }).waitFor();
  await submit('Send a command', { Type: 'wave', Risk: 'low' });
  await page.locator('ol.live li', { hasText: 'wave (low) queued' }).waitFor();
  // Watching marks nothing delivered: the command waits for its robot.
  await page.waitForTimeout(500);
  check(!(await page.locator('ol.live li', { hasText: 'wave (low) delivered' }).count()), 'watching delivered the command');
  // The robot reads its own stream (it gets the command) and acknowledges it.
  const robot = new AbortController();
  const res = await fetch(`${base}/api/commands/stream/${assetId}`, { headers: { accept: 'text/event-stream', authorization: `Bearer ${credential}` }, signal: robot.signal });
  check(res.ok, `the robot's stream: ${res.status}`);
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let received = '';
  while (!/\ndata:.*\n\n/.test(`\n${received}`)) received += (await reader.read()).value ?? '';
  robot.abort();
  const sent = JSON.parse(received.match(/data:(.*)/)[1]);
  check(sent.type === 'wave', `the robot was sent: ${received}`);
  const ack = await fetch(`${base}/api/commands/${sent.command_id}/ack`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${credential}` },
    body: JSON.stringify({ ok: true }),
  });
  check(ack.ok, `the robot's ack: ${ack.status}`);
  await page.locator('ol.live li', { hasText: 'wave (low) acknowledged_ok' }).waitFor();
  await submit('Send a command', { Type: 'unlock', Risk: 'high' });
  await page.locator('ol.live li', { hasText: 'unlock (high) awaiting_approval' }).waitFor();
  await page.getByRole('button', { name: 'Approve unlock' }).click();
  await page.locator('ol.live li', { hasText: 'unlock (high) queued' }).waitFor();
  await noError('robots');
  await page.screenshot({ path: join(artefacts, 'robots-live.png'), fullPage: true });
});

await story('a member without the permission sees the 403 name it in the page', async () => {
  // A person registers (the public route), the owner admits them on the
  // Members page with the platform's member role, which grants nothing.
  const member = { email: `member-${unique}@example.com`, password: 'correct horse battery' };
  const registered = await fetch(`${base}/api/auth/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ...member, display_name: 'Member' }) });
  const person = (await registered.json()).data?.person_id;
  check(registered.status === 201 && person, `register: ${registered.status}`);
  await open('members');
  await submit('Admit a person', { 'Person id': person });
  check((await message('ok')).includes('Person admitted'), 'the person was not admitted');
  await page.getByRole('button', { name: 'Sign out' }).click();
  await submit('Sign in as a tenant admin', { Email: member.email, Password: member.password });
  try {
    await page.waitForSelector('main[data-page="overview"]');
    await open('webhooks');
    const refused = await message('error');
    check(/^Forbidden \(HTTP 403\): .*Missing permission: webhook\.(endpoint|delivery|deadletter)\.read$/.test(refused), `the page says: ${refused}`);
    await page.screenshot({ path: join(artefacts, 'forbidden.png'), fullPage: true });
  } finally {
    // Back to the owner for what follows.
    await page.getByRole('button', { name: 'Sign out' }).click();
    await submit('Sign in as a tenant admin', { Email: owner.email, Password: owner.password });
    await page.waitForSelector('main[data-page="overview"]');
  }
});

await story('every tenant page renders, passes axe-core and fits a phone', async () => {
  for (const path of ['overview', 'tenant', 'members', 'audit', 'robots', 'billing']) {
    await visit(path);
    await noError(path);
  }
});

// ---- the operator's stories (H10) --------------------------------------
// The operator signs in with a database operator token, minted here with
// the run's break-glass secret (run.sh sets ADMIN_OPS_TOKEN to it).
const breakGlass = process.env.CONSOLE_BREAK_GLASS;
const opsTenant = { app: `ops-${unique}`, name: `Ops tenant ${unique}` };
const catalog = `story-${unique}`;

/** Calls an operator route with the break-glass secret or the given token. */
async function asOperator(path, { method = 'GET', body, token = breakGlass } = {}) {
  const r = await fetch(`${base}${path}`, { method, headers: { 'content-type': 'application/json', 'x-admin-ops-token': token }, body: body && JSON.stringify(body) });
  return { status: r.status, body: (r.headers.get('content-type') ?? '').includes('json') ? await r.json() : await r.text() };
}

/** Waits for a success message containing `text`; answers the message. */
async function said(text) {
  const m = page.locator('.message.ok', { hasText: text }).first();
  await m.waitFor();
  return (await m.textContent()) ?? '';
}

await story('the operator signs in with a database operator token', async () => {
  check(breakGlass, 'CONSOLE_BREAK_GLASS is not set (console/tests/run.sh sets it)');
  const minted = await asOperator('/admin/security/ops-tokens', { method: 'POST', body: { label: 'console story', reason: 'browser stories' } });
  check(minted.status === 201 && minted.body.data?.token?.startsWith('ops_'), `minting a token: ${minted.status} ${JSON.stringify(minted.body)}`);
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.waitForSelector('main[data-page="signin"]');
  await page.getByRole('link', { name: 'Operator sign-in' }).click();
  await page.waitForSelector('main[data-page="ops-signin"]');
  // A token the hub does not know: the page shows its 401 envelope.
  await submit('Sign in as an operator', { 'Operator token': 'ops_not-a-token', 'Operator id': 'console-story' });
  const refused = await message('error');
  check(refused === 'Unauthorized (HTTP 401): admin token required', `a wrong token: ${refused}`);
  await visit('ops-signin');
  await submit('Sign in as an operator', { 'Operator token': minted.body.data.token, 'Operator id': 'console-story' });
  await page.waitForSelector('main[data-page="ops-tenants"]');
  check((await page.textContent('#who'))?.includes('Operator'), 'the header does not say Operator');
  const stored = await page.evaluate(() => [localStorage.length, sessionStorage.length, document.cookie]);
  check(stored[0] === 0 && stored[1] === 0 && stored[2] === '', `something was stored: ${JSON.stringify(stored)}`);
  // The operator's navigation holds the operator pages only.
  const links = await page.locator('#nav a').allTextContents();
  check(links.includes('Tenants') && links.includes('Health') && !links.includes('Overview'), `navigation: ${links.join(', ')}`);
});

await story('the operator lists tenants, suspends one (its admin’s page refuses) and resumes it', async () => {
  // The tenant's admin, signed in in a second browser context.
  const second = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const admin = await second.newPage();
  admin.setDefaultTimeout(TIMEOUT);
  try {
    await admin.goto(`${base}/console#/signin`);
    const signin = admin.getByRole('form', { name: 'Sign in as a tenant admin', exact: true });
    await signin.getByLabel('Email', { exact: true }).fill(owner.email);
    await signin.getByLabel('Password', { exact: true }).fill(owner.password);
    await signin.locator('button[type="submit"]').click();
    await admin.waitForSelector('main[data-page="overview"]');

    await open('ops-tenants');
    const rows = page.getByRole('region', { name: 'Tenants table' }).locator('tbody tr');
    await rows.filter({ hasText: owner.org }).waitFor();
    console.log(`   the operator lists ${await rows.count()} tenant(s)`);
    // The row shows the tenant's suspension, and only the action that applies.
    const row = rows.filter({ has: page.getByRole('button', { name: new RegExp(`^(Suspend|Resume) ${owner.org}$`) }) });
    const state = async () => (await row.locator('td').nth(4).textContent()) ?? '';
    check((await state()) === 'Not suspended', `before: ${await state()}`);
    check((await page.getByRole('button', { name: `Resume ${owner.org}`, exact: true }).count()) === 0, 'an open tenant offers Resume');
    await page.getByRole('button', { name: `Suspend ${owner.org}`, exact: true }).click();
    await submit(`Suspend ${owner.org}`, { Reason: 'console story' });
    const suspended = await said(`${owner.org} suspended`);
    check(suspended.includes('by console story ('), `suspension: ${suspended}`);
    await page.getByRole('button', { name: `Resume ${owner.org}`, exact: true }).waitFor();
    check(/^Suspended .* by console story \(.*\): console story$/.test(await state()), `suspended: ${await state()}`);
    check((await page.getByRole('button', { name: `Suspend ${owner.org}`, exact: true }).count()) === 0, 'a suspended tenant offers Suspend');

    // The tenant's own page now refuses, and so does its API key.
    await admin.evaluate(() => { location.hash = `#/tenant?at=${Date.now()}`; });
    await admin.waitForSelector('main[data-page="tenant"]');
    const refusal = (await admin.locator('.message.error').first().textContent()) ?? '';
    check(/HTTP 423/.test(refusal) && /suspended/.test(refusal), `the suspended tenant's page says: ${refusal}`);
    await admin.screenshot({ path: join(artefacts, 'tenant-suspended.png'), fullPage: true });
    if (apiKey) {
      const me = await fetch(`${base}/api/me`, { headers: { authorization: `Bearer ${apiKey}` } });
      check(me.status === 423, `GET /api/me with the suspended tenant's key: ${me.status}`);
    }

    await page.getByRole('button', { name: `Resume ${owner.org}`, exact: true }).click();
    await said(`${owner.org} resumed`);
    await page.getByRole('button', { name: `Suspend ${owner.org}`, exact: true }).waitFor();
    check((await state()) === 'Not suspended', `after resuming: ${await state()}`);
    check((await page.getByRole('button', { name: `Resume ${owner.org}`, exact: true }).count()) === 0, 'a resumed tenant offers Resume');
    await admin.evaluate(() => { location.hash = `#/tenant?at=${Date.now()}`; });
    await admin.waitForSelector('main[data-page="tenant"]');
    await admin.waitForLoadState('networkidle');
    const after = await admin.locator('.message.error').allTextContents();
    check(after.length === 0, `after the resumption the tenant's page says: ${after.join(' | ')}`);
  } finally {
    await second.close();
  }
});

let opsTenantId;
await story('the operator creates a pool, an app and a tenant, and maps its pools', async () => {
  await open('ops-pools');
  await submit('Create a pool', { 'Pool index': 7, Kind: 'app', Region: 'eu-west-1' });
  await said('Pool 7 (app, eu-west-1) created.');
  await visit('ops-pools');
  await open('ops-tenants');
  await submit('Create an app', { 'App id': opsTenant.app, 'App name': 'Ops story' });
  await said(`App ${opsTenant.app}`);
  await submit('Create a tenant', { 'App id of the tenant': opsTenant.app, 'Tenant name': opsTenant.name });
  const created = await said(`Tenant ${opsTenant.name} created`);
  opsTenantId = /created: ([0-9a-f-]{36})/.exec(created)?.[1];
  check(opsTenantId, `created: ${created}`);
  await submit('Set a tenant’s pool map', { Tenant: opsTenantId, 'Admin pool': '0', 'App pools (JSON)': JSON.stringify({ [opsTenant.app]: 7 }), Region: 'eu-west-1', Status: 'ACTIVE' });
  await said('Pool map set: admin pool 0, ACTIVE');
  await page.getByRole('region', { name: 'Pool map table' }).getByText(`${opsTenant.app} → 7`).waitFor();
  await visit('ops-tenants');
});

await story('operator tokens: one minted is shown once, works, and is refused once revoked', async () => {
  await open('ops-tokens');
  await submit('Mint an operator token', { Label: 'second operator', Reason: 'console story' });
  const token = await page.getByLabel('Token second operator', { exact: true }).inputValue();
  check(token.startsWith('ops_'), `the token shown is ${token.slice(0, 4)}…`);
  check((await asOperator('/admin/tenants', { token })).status === 200, 'the minted token does not work');
  const table = page.getByRole('region', { name: 'Operator tokens table' });
  const row = table.locator('tbody tr', { hasText: 'second operator' });
  check((await row.locator('td').nth(2).textContent()) === 'active', `minted: ${await row.locator('td').nth(2).textContent()}`);
  await page.getByRole('button', { name: /^Revoke token second operator/ }).click();
  await said('revoked');
  const after = await asOperator('/admin/tenants', { token });
  check(after.status === 401, `the revoked token: ${after.status}`);
  // The list (GET /admin/security/ops-tokens) shows it revoked, with no Revoke left, and no secret.
  await row.locator('td', { hasText: /^revoked / }).waitFor();
  check((await row.getByRole('button').count()) === 0, 'a revoked token still offers Revoke');
  const listed = await table.textContent();
  check(!listed.includes(token) && !listed.includes(token.slice(4, 20)), 'the token list shows a token');
  // Filtered to the revoked ones: the signed-in (active) token leaves the list, the revoked one stays.
  await page.getByLabel('Show', { exact: true }).selectOption('revoked');
  await table.locator('tbody td:first-child', { hasText: /^console story$/ }).first().waitFor({ state: 'hidden' });
  await table.locator('tbody tr', { hasText: 'second operator' }).waitFor();
  await page.getByLabel('Show', { exact: true }).selectOption('');
  await visit('ops-tokens');
});

await story('the signing key rotates', async () => {
  await open('ops-signing-key');
  await submit('Rotate the signing key', { Reason: 'console story' });
  const rotated = await said('Signing key rotated');
  await page.getByRole('region', { name: 'Rotations in the platform chain table' }).getByText('console story').first().waitFor();
  console.log(`   ${rotated}`);
  await visit('ops-signing-key');
});

await story('a pricing catalog: created, rated and activated', async () => {
  await open('ops-pricing');
  await submit('Create a catalog version', { 'Catalog id': catalog, Version: 1, Currency: 'EUR' });
  await said(`Catalog ${catalog} version 1 created, draft.`);
  await submit(`Set a rate in ${catalog}`, { Sku: 'api.call', Unit: 'call', Mode: 'flat_per_call', 'Price (minor units)': 2 });
  await said('Rate of api.call set');
  await page.getByRole('region', { name: `Rates of ${catalog} table` }).getByText('0.02 EUR').waitFor();
  await submit(`Set the status of ${catalog}`, { Status: 'active' });
  await said(`${catalog} is active.`);
  await visit('ops-pricing', `catalog=${catalog}`);
  await noError('ops-pricing');
});

await story('invoices across tenants', async () => {
  await visit('ops-invoices');
  await noError('ops-invoices');
});

await story('a BYOK binding: bound, rotated, revoked', async () => {
  check(opsTenantId, 'no tenant of the operator story');
  await open('ops-byok');
  await submit('Bind a tenant to a customer key', { 'Tenant to bind': opsTenantId, Provider: 'aws-kms', 'Customer key (ARN or name)': 'arn:aws:kms:eu-west-1:111122223333:key/console-story', 'Tenant key id': `tk-${unique}-1` });
  await said(`${opsTenant.name} bound to`);
  await submit(`Rotate the tenant key of ${opsTenant.name}`, { 'New tenant key': `tk-${unique}-2` });
  await said(`Tenant key of ${opsTenant.name} rotated to tk-${unique}-2`);
  await submit(`Revoke the binding of ${opsTenant.name}`, { 'Reason for the revocation': 'console story' });
  await said(`Binding of ${opsTenant.name} revok`);
  await visit('ops-byok', `tenant=${opsTenantId}`);
  await noError('ops-byok');
});

await story('the platform audit chain: browsed and verified', async () => {
  await open('ops-audit');
  const entries = page.getByRole('region', { name: 'Platform audit entries table' });
  for (const type of ['security.admin_ops_token.issued.v1', 'security.admin_ops_token.revoked.v1', 'security.signing_key.rotated.v1']) {
    await entries.getByText(type).first().waitFor();
  }
  await entries.getByRole('button', { name: /^Details of entry/ }).first().click();
  await page.locator('main h3', { hasText: /^Entry \d+ of platform/ }).waitFor();
  await submit('Verify the chains of a tenant', { 'Chains of': '00000000-0000-0000-0000-000000000000' });
  const verdict = await said('platform: verified');
  check(/verified, \d+ entries checked/.test(verdict), `verdict: ${verdict}`);
  await visit('ops-audit');
});

await story('the health page renders /metrics as figures', async () => {
  await open('ops-health');
  const figure = async (card, name) => Number((await page.getByRole('group', { name: card }).locator('dt', { hasText: new RegExp(`^${name}$`) }).locator('xpath=following-sibling::dd[1]').textContent()).replace(/,/g, ''));
  const answered = await figure('Requests', 'Answered');
  const errors = await figure('Requests', '5xx');
  const direct = await asOperator('/metrics');
  const fives = direct.body.split('\n').filter((l) => l.startsWith('hub_http_requests_total{') && l.includes('status="5xx"')).reduce((a, l) => a + Number(l.split(' ').pop()), 0);
  check(answered > 0 && errors === fives, `requests ${answered}, 5xx ${errors} (the hub says ${fives})`);
  console.log(`   health: ${answered} requests answered, ${errors} 5xx`);
  await visit('ops-health');
  await noError('ops-health');
});

await story('no request left the hub and nothing broke the policy', async () => {
  check(problems.length === 0, problems.join('\n'));
});

await browser.close();

console.log(`\nconsole first load over loopback (HTML, stylesheet and modules to the rendered sign-in page): ${coldMs} ms`);
console.log('console page load times over loopback (hash change to rendered, API calls included; module import and render alone):');
for (const l of loads) console.log(`  ${l.path.padEnd(10)} ${String(l.ms).padStart(5)} ms  (${l.rendered} ms)  ${l.desktop}  ${l.phone}`);
console.log('axe-core: ' + scans.map((s) => `${s.path} ${s.violations} violation(s), ${s.serious} serious`).join('; '));
console.log(`console stories: ${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
