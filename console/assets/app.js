// The console's shell: a hash-routed single page. `#/<path>` names a row
// of routes.js; its module renders into <main>. The navigation lists the
// pages the signed-in credential's kind may open.
import { session, signOut } from './api.js';
import { routes, home } from './routes.js';
import { h } from './ui.js';

const main = document.getElementById('main');
const nav = document.getElementById('nav');
const who = document.getElementById('who');
const signout = document.getElementById('signout');

/** Leaves the current page's live work (an open stream, a timer). */
let leave = () => {};

/** Goes to a page: navigate('keys') or navigate('keys', { id: '…' }). */
export function navigate(path, params) {
  const qs = params ? `?${new URLSearchParams(params)}` : '';
  const target = `#/${path}${qs}`;
  if (location.hash === target) render();
  else location.hash = target;
}

function current() {
  const hash = location.hash.startsWith('#/') ? location.hash.slice(2) : '';
  const [path, qs] = hash.split('?');
  return { path: path || '', params: new URLSearchParams(qs ?? '') };
}

function allowed(route) {
  return route.who === 'anyone' || route.who === session.kind;
}

function drawNav(active) {
  const visible = routes.filter((r) => r.group && allowed(r));
  nav.hidden = visible.length === 0;
  const groups = [...new Set(visible.map((r) => r.group))];
  nav.replaceChildren(
    ...groups.map((group) =>
      h(
        'div',
        { class: 'nav-group' },
        h('p', { class: 'nav-title' }, group),
        h(
          'ul',
          {},
          visible
            .filter((r) => r.group === group)
            .map((r) => h('li', {}, h('a', { href: `#/${r.path}`, 'aria-current': r.path === active ? 'page' : null }, r.title))),
        ),
      ),
    ),
  );
  signout.hidden = !session.token;
  who.textContent = session.token
    ? `${session.kind === 'operator' ? 'Operator' : session.email}${session.tenantName ? ` · ${session.tenantName}` : ''}`
    : '';
}

async function render() {
  leave();
  leave = () => {};
  const { path, params } = current();
  let route = routes.find((r) => r.path === path);
  if (!session.token && (!route || route.who !== 'anyone')) {
    route = routes.find((r) => r.path === 'signin');
    if (path && path !== 'signin') params.set('next', path);
  } else if (!route || !allowed(route)) {
    // The kind's home page, else its first page.
    route = routes.find((r) => r.path === home[session.kind] && allowed(r)) ?? routes.find((r) => r.group && allowed(r)) ?? routes.find((r) => r.path === 'signin');
  }
  drawNav(route.path);
  // Set again once the page has rendered (the browser tests wait for it).
  delete main.dataset.page;
  const started = performance.now();
  try {
    const module = await import(route.module);
    const result = await module.render(main, { params, navigate, session, route });
    if (typeof result === 'function') leave = result;
  } catch (e) {
    main.replaceChildren(h('h1', { tabindex: '-1' }, route.title), h('p', { class: 'message error', role: 'alert' }, e.message));
  }
  main.dataset.page = route.path;
  main.dataset.loadMs = String(Math.round(performance.now() - started));
  // Keyboard and screen reader users land on the new page's heading (not
  // on the first load: there the skip link comes first).
  if (rendered) main.querySelector('h1')?.focus();
  rendered = true;
}

let rendered = false;

signout.addEventListener('click', () => {
  signOut();
  navigate('signin');
});

document.querySelector('.skip').addEventListener('click', (event) => {
  event.preventDefault();
  main.focus();
});

window.addEventListener('hashchange', render);
render();
