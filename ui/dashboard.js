// Wharf's dashboard (issue #20; docs/OPERATIONS.md, "The dashboard"): reads the orchestrator's
// API with the token the user gives (?token= once in the URL, or the form; kept for the
// browser session only) and redraws every PERIOD_MS: hosts, the Pingmesh heatmap, top talkers
// by tenant and usage against quotas. Everything the API returns is shown as text (never
// parsed as HTML): the reports come from routers.
'use strict';

const TOKEN_KEY = 'wharf-token';
const PERIOD_MS = 2000;
const SVG = 'http://www.w3.org/2000/svg';
const previous = new Map();  // container key -> {tx, rx, at}: the last sample, for rates

function token() { return sessionStorage.getItem(TOKEN_KEY) || ''; }

// A ?token= in the URL is kept for the session and taken out of the address bar.
function takeTokenFromUrl() {
  const url = new URL(window.location.href);
  const t = url.searchParams.get('token');
  if (!t) return;
  sessionStorage.setItem(TOKEN_KEY, t);
  url.searchParams.delete('token');
  window.history.replaceState(null, '', url.pathname + url.search + url.hash);
}

async function api(path) {
  const r = await fetch('/v1/' + path, {headers: {Authorization: 'Bearer ' + token()}});
  const body = await r.json().catch(() => ({}));
  if (!r.ok) {
    const e = new Error(body.error || ('HTTP ' + r.status));
    e.status = r.status;
    throw e;
  }
  return body;
}

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function row(cells) {
  const tr = el('tr');
  for (const c of cells) {
    const td = el('td');
    if (c instanceof Node) td.appendChild(c); else td.textContent = String(c);
    tr.appendChild(td);
  }
  return tr;
}

function bytes(n) {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? n : n.toFixed(1)) + ' ' + units[i];
}

function micros(us) { return us >= 1000 ? (us / 1000).toFixed(1) + ' ms' : us.toFixed(0) + ' µs'; }

// The heatmap class of one link: its state, or for an "up" link its p99 band.
function linkClass(link) {
  if (!link) return 'unknown';
  if (link.state !== 'up') return link.state;
  const p99 = link.rtt_p99_us;
  return p99 < 100 ? 'fast' : p99 < 1000 ? 'ok' : p99 < 10000 ? 'slow' : 'slower';
}

function drawHosts(hosts, mesh, usage) {
  const body = document.querySelector('#hosts tbody');
  body.replaceChildren();
  const registered = new Map(hosts.map((h) => [h.name, h]));
  for (const name of mesh.hosts) {
    const h = registered.get(name);
    const out = mesh.links.filter((l) => l.from === name);
    const up = out.filter((l) => l.state === 'up').length;
    const links = el('span', out.length ? up + ' of ' + out.length + ' up' : 'none reported',
                     out.length && up < out.length ? 'state-down' : 'state-up');
    const here = usage.filter((c) => c.host === name).length;
    body.appendChild(row([name, h ? h.address : '(not registered)', h ? (h.subnet || '') : '',
                          h ? h.lid_first + '–' + h.lid_last : '', links, here]));
  }
}

function drawHeatmap(mesh) {
  const names = mesh.hosts;
  const byPair = new Map(mesh.links.map((l) => [l.from + '\u0000' + l.to, l]));
  const cell = 56, left = 70, top = 26;
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('id', 'pingmesh');
  svg.setAttribute('width', left + cell * names.length + 4);
  svg.setAttribute('height', top + cell * names.length + 4);
  const text = (x, y, s, cls, anchor) => {
    const t = document.createElementNS(SVG, 'text');
    t.setAttribute('x', x);
    t.setAttribute('y', y);
    if (anchor) t.setAttribute('text-anchor', anchor);
    if (cls) t.setAttribute('class', cls);
    t.textContent = s;
    svg.appendChild(t);
  };
  names.forEach((n, i) => {
    text(left + i * cell + cell / 2, top - 8, n, '', 'middle');
    text(4, top + i * cell + cell / 2 + 4, n);
  });
  names.forEach((from, r) => names.forEach((to, c) => {
    const link = byPair.get(from + '\u0000' + to);
    const cls = from === to ? 'self' : linkClass(link);
    const rect = document.createElementNS(SVG, 'rect');
    rect.setAttribute('x', left + c * cell);
    rect.setAttribute('y', top + r * cell);
    rect.setAttribute('width', cell - 2);
    rect.setAttribute('height', cell - 2);
    rect.setAttribute('class', 'cell ' + cls);
    rect.dataset.from = from;
    rect.dataset.to = to;
    rect.dataset.state = from === to ? 'self' : (link ? link.state : 'unknown');
    const title = document.createElementNS(SVG, 'title');
    title.textContent = from === to ? from : link
      ? `${from} → ${to}: ${link.state}, p50 ${micros(link.rtt_p50_us)}, p99 ${micros(link.rtt_p99_us)}, loss ${(link.loss * 100).toFixed(1)} %`
      : `${from} → ${to}: not reported`;
    rect.appendChild(title);
    svg.appendChild(rect);
    if (from === to || !link) return;
    const x = left + c * cell + (cell - 2) / 2, y = top + r * cell + (cell - 2) / 2 + 4;
    const label = link.state === 'up' ? micros(link.rtt_p99_us) : link.state;
    text(x, y, label + (link.loss > 0 ? ' ✕' : ''), link.state === 'down' ? 'mark' : '', 'middle');
  }));
  document.getElementById('heatmap').replaceChildren(svg);
}

// Rates from this sample and the last: bytes per second sent and received.
function withRates(usage, now) {
  return usage.map((c) => {
    const key = [c.host, c.tenant, c.network, c.container].join('/');
    const last = previous.get(key);
    previous.set(key, {tx: c.tx_bytes, rx: c.rx_bytes, at: now});
    const dt = last ? (now - last.at) / 1000 : 0;
    const rate = (a, b) => (dt > 0 && a >= b ? (a - b) / dt : 0);
    return {...c, tx_rate: last ? rate(c.tx_bytes, last.tx) : 0,
            rx_rate: last ? rate(c.rx_bytes, last.rx) : 0};
  });
}

function drawTalkers(usage) {
  const byTenant = new Map();
  for (const c of usage) {
    const t = c.tenant || '(no tenant)';
    if (!byTenant.has(t)) byTenant.set(t, []);
    byTenant.get(t).push(c);
  }
  const box = document.getElementById('talkers');
  box.replaceChildren();
  if (byTenant.size === 0) box.appendChild(el('p', 'No containers reported.', 'muted'));
  for (const [tenant, list] of [...byTenant].sort()) {
    list.sort((a, b) => (b.tx_rate + b.rx_rate) - (a.tx_rate + a.rx_rate) ||
                        (b.tx_bytes + b.rx_bytes) - (a.tx_bytes + a.rx_bytes));
    const top = list.slice(0, 5);
    const max = Math.max(1, ...top.map((c) => c.tx_rate + c.rx_rate));
    box.appendChild(el('h3', tenant));
    const table = el('table');
    table.appendChild(row(['Container', 'Host', 'Rate (sent + received)', 'Sent in all']));
    for (const c of top) {
      const rate = el('span');
      const bar = el('span', null, 'bar');
      bar.style.width = (8 * (c.tx_rate + c.rx_rate) / max).toFixed(2) + 'em';
      rate.append(bar, bytes(c.tx_rate + c.rx_rate) + '/s');
      table.appendChild(row([c.container, c.host, rate, bytes(c.tx_bytes)]));
    }
    box.appendChild(table);
  }
}

function drawUsage(usage) {
  const body = document.querySelector('#usage tbody');
  body.replaceChildren();
  for (const c of [...usage].sort((a, b) => (a.tenant + a.container).localeCompare(b.tenant + b.container))) {
    const kinds = el('span');
    for (const [kind, held] of Object.entries(c.objects)) {
      const quota = c.quota[kind];
      if (!held && quota === undefined) continue;
      const near = quota !== undefined && held >= 0.9 * quota;
      const shown = kind === 'mr_bytes' ? bytes(held) + (quota !== undefined ? ' / ' + bytes(quota) : '')
                                        : held + (quota !== undefined ? ' / ' + quota : '');
      kinds.appendChild(el('span', kind + ' ' + shown, near ? 'kind near' : 'kind'));
    }
    body.appendChild(row([c.tenant || '(none)', c.container, c.host, bytes(c.tx_bytes),
                          bytes(c.rx_bytes), kinds]));
  }
}

function showLogin(message) {
  document.getElementById('views').hidden = true;
  document.getElementById('logout').hidden = true;
  document.getElementById('login').hidden = false;
  document.getElementById('login-error').textContent = message || '';
  document.getElementById('status').textContent = 'not signed in';
}

async function refresh() {
  if (!token()) return showLogin();
  try {
    const [hosts, mesh, usage] = await Promise.all([api('hosts'), api('pingmesh'), api('usage')]);
    const withRate = withRates(usage, Date.now());
    document.getElementById('login').hidden = true;
    document.getElementById('views').hidden = false;
    document.getElementById('logout').hidden = false;
    drawHosts(hosts, mesh, withRate);
    drawHeatmap(mesh);
    drawTalkers(withRate);
    drawUsage(withRate);
    document.getElementById('status').textContent =
        'updated ' + new Date().toLocaleTimeString() + ' · ' + mesh.hosts.length + ' hosts';
  } catch (e) {
    if (e.status === 401 || e.status === 403) {
      sessionStorage.removeItem(TOKEN_KEY);
      return showLogin('The orchestrator refused the token: ' + e.message);
    }
    document.getElementById('status').textContent = 'cannot reach the orchestrator: ' + e.message;
  }
}

document.getElementById('login').addEventListener('submit', (ev) => {
  ev.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, document.getElementById('token').value.trim());
  refresh();
});
document.getElementById('logout').addEventListener('click', () => {
  sessionStorage.removeItem(TOKEN_KEY);
  showLogin();
});

takeTokenFromUrl();
refresh();
setInterval(refresh, PERIOD_MS);
