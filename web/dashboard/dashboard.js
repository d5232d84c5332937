// The dashboard's script: reads the router's /events stream (server-sent events) and draws models, endpoints and the
// timeline. Plain browser JavaScript, no framework, no build step. Every value from the router is put on the page as
// text (textContent), never as HTML.

const MAX_TIMELINE = 500;

const page = {
  connection: document.getElementById('connection'),
  instance: document.getElementById('instance'),
  scope: document.getElementById('scope'),
  models: document.querySelector('#models tbody'),
  endpoints: document.querySelector('#endpoints tbody'),
  kv: document.getElementById('kv'),
  kvEndpoints: document.querySelector('#kv-endpoints tbody'),
  kvModels: document.querySelector('#kv-models tbody'),
  kvTokenizers: document.querySelector('#kv-tokenizers tbody'),
  kvWarnings: document.getElementById('kv-warnings'),
  timeline: document.getElementById('timeline'),
};

/** the router's clock minus this browser's, so that ages are right whatever this machine's time is */
let clockOffset = 0;
let events = [];

/** An element with attributes and children; strings become text nodes. */
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs ?? {})) {
    if (value === undefined || value === null) continue;
    if (name === 'class') node.className = value;
    else if (name.startsWith('data-')) node.dataset[name.slice(5).replace(/-(\w)/g, (_, c) => c.toUpperCase())] = value;
    else node.setAttribute(name, value);
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(typeof child === 'string' || typeof child === 'number' ? document.createTextNode(String(child)) : child);
  }
  return node;
}

function routerNow() {
  return Date.now() + clockOffset;
}

function toMs(at) {
  return typeof at === 'number' ? at : Date.parse(at);
}

/** 8.9 s, 2 min, 2 min 5 s, 1 h 10 min */
function seconds(s) {
  if (s < 60) return `${Math.round(s * 10) / 10} s`;
  const [big, small, bigUnit, smallUnit] =
    s < 3600 ? [Math.floor(s / 60), Math.round(s % 60), 'min', 's'] : [Math.floor(s / 3600), Math.round((s % 3600) / 60), 'h', 'min'];
  return small === 0 ? `${big} ${bigUnit}` : `${big} ${bigUnit} ${small} ${smallUnit}`;
}

function ago(at) {
  const s = Math.max(0, (routerNow() - toMs(at)) / 1000);
  if (s < 1) return 'just now';
  if (s < 60) return `${Math.floor(s)} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min ago`;
  return `${Math.floor(s / 86400)} d ago`;
}

/** A span that keeps saying how long ago `at` was (see refreshAges). */
function age(at, prefix = '') {
  if (at === null || at === undefined) return null;
  return el(
    'span',
    { class: 'age small', 'data-at': String(toMs(at)), 'data-prefix': prefix, title: new Date(toMs(at)).toISOString() },
    prefix + ago(at),
  );
}

function refreshAges() {
  for (const span of document.querySelectorAll('.age')) span.textContent = span.dataset.prefix + ago(Number(span.dataset.at));
}

function badge(state) {
  return el('span', { class: `badge state-${state}` }, state);
}

function modelRow(m) {
  const roles = m.roles
    ? Object.entries(m.roles)
        .map(([role, c]) => `${role} ${c.ready}/${c.total}`)
        .join(' · ')
    : null;
  const coldStarts = [...m.coldStarts]
    .reverse()
    .map((c) => el('div', { title: c.endpoint ?? '' }, `${c.kind === 'wake' ? 'wake' : 'load'} ${seconds(c.seconds)} `, age(c.at)));
  return el(
    'tr',
    { 'data-model': m.id, 'data-state': m.status },
    el(
      'td',
      null,
      el('strong', null, m.id),
      m.aliases.length > 0 && el('div', { class: 'small' }, `aliases: ${m.aliases.join(', ')}`),
      m.declaredBy.length > 0 && el('div', { class: 'small' }, `declared by ${m.declaredBy.join(', ')}`),
    ),
    el(
      'td',
      null,
      badge(m.status),
      ' ',
      age(m.since, 'since '),
      el('div', { class: 'small reason' }, m.reason),
      m.wakeStalled && el('div', { class: 'alarm' }, 'wake stalled: demand with no endpoint'),
    ),
    el('td', { class: 'num' }, `${m.readyEndpoints} / ${m.endpoints}`, roles && el('div', { class: 'small' }, roles)),
    el('td', { class: 'num' }, String(m.held), m.held > 0 && el('span', { class: 'small' }, ` (${seconds(m.oldestHeldSeconds)})`)),
    // flow control: what waits for room on the model's engines, and how full they are (1 or more: saturated)
    el(
      'td',
      { class: 'num', 'data-queued': String(m.queued) },
      m.saturation === null ? el('span', { class: 'muted' }, '—') : String(m.queued),
      m.saturation !== null &&
        el(
          'span',
          { class: m.saturation >= 1 ? 'small alarm' : 'small', 'data-saturation': String(m.saturation) },
          ` (${m.saturation.toFixed(2)})`,
        ),
    ),
    el('td', { class: 'num' }, String(m.inFlight)),
    el('td', { class: 'num' }, m.demandPerMinute === null ? '…' : String(Math.round(m.demandPerMinute * 10) / 10)),
    el('td', null, coldStarts.length > 0 ? coldStarts : el('span', { class: 'muted' }, 'none seen')),
    el(
      'td',
      { class: 'num' },
      m.retryAfterSeconds === null ? '—' : `${m.retryAfterSeconds} s`,
      m.holdSeconds > 0 && el('div', { class: 'small' }, `held up to ${seconds(m.holdSeconds)}`),
    ),
  );
}

function loadText(load) {
  if (!load) return el('span', { class: 'muted' }, '—');
  const kv = load.kvUsage === null ? '' : ` · KV ${Math.round(load.kvUsage * 100)}%`;
  return el(
    'span',
    { class: load.fresh ? '' : 'muted', title: `scraped ${load.at}` },
    `running ${load.running} · waiting ${load.waiting}${kv}`,
    load.fresh ? '' : ' (stale)',
  );
}

function endpointRow(e) {
  const probe = e.lastProbe
    ? el(
        'div',
        null,
        el('span', { class: e.lastProbe.ok ? '' : 'error-current' }, e.lastProbe.ok ? 'ok ' : 'not ready '),
        age(e.lastProbe.at),
        el('div', { class: 'small' }, e.lastProbe.detail),
      )
    : el('span', { class: 'muted' }, 'not probed yet');
  const error = e.lastError
    ? el(
        'div',
        { class: e.lastErrorPast ? 'error-past' : 'error-current', 'data-error': e.lastErrorPast ? 'past' : 'current' },
        e.lastErrorPast && el('span', { class: 'tag' }, 'past'),
        e.lastError,
        ' ',
        age(e.lastErrorAt),
      )
    : el('span', { class: 'muted' }, 'none');
  return el(
    'tr',
    { 'data-endpoint': e.url, 'data-state': e.state },
    el(
      'td',
      null,
      el('span', { class: 'url' }, e.url),
      e.id !== e.url && el('div', { class: 'small' }, e.id),
      el('div', { class: 'small' }, e.role ? `${e.source} · role ${e.role}` : e.source),
    ),
    el('td', null, e.models.join(', ')),
    el('td', null, badge(e.state), ' ', age(e.since, 'since ')),
    el('td', null, probe),
    el('td', { class: 'num' }, String(e.inFlight)),
    el('td', null, loadText(e.load)),
    el('td', null, error),
  );
}

function percent(part, whole) {
  return whole > 0 ? `${Math.round((part / whole) * 100)}%` : '—';
}

/** An endpoint's KV-cache event stream, as the router follows it. */
function kvEndpointRow(k) {
  const stream = el('span', { class: `badge ${k.connected ? 'state-ready' : 'state-failed'}` }, k.connected ? 'connected' : 'disconnected');
  const error = k.lastError
    ? el('span', { class: k.connected ? 'error-past' : 'error-current' }, k.lastError)
    : el('span', { class: 'muted' }, 'none');
  return el(
    'tr',
    { 'data-kv-endpoint': k.url, 'data-connected': String(k.connected) },
    el('td', null, el('span', { class: 'url' }, k.url), k.id !== k.url && el('div', { class: 'small' }, k.id)),
    el('td', null, stream, k.ranks > 1 && el('div', { class: 'small' }, `${k.ranksConnected} of ${k.ranks} ranks`)),
    el('td', { class: 'num', 'data-kv-blocks': String(k.blocks) }, String(k.blocks)),
    el('td', null, k.lastEventAt === null ? el('span', { class: 'muted' }, 'none yet') : age(k.lastEventAt)),
    el('td', { class: 'num' }, `${k.gaps} / ${k.replays} / ${k.rebuilds} / ${k.restarts}`),
    el('td', { class: 'num' }, String(k.malformed)),
    el('td', null, error),
  );
}

/** A model's kvaware decisions since this process started. */
function kvModelRow(m) {
  const reasons = Object.entries(m.fallbacks).map(([reason, n]) => `${reason} ${n}`);
  // the two shares add up to 100% (each rounded alone, 87.5% and 12.5% would show as 88% and 13%)
  const fallen = m.decisions > 0 ? `${100 - Math.round((m.matched / m.decisions) * 100)}%` : '—';
  return el(
    'tr',
    { 'data-kv-model': m.model },
    el('td', null, el('strong', null, m.model)),
    el('td', { class: 'num' }, String(m.decisions)),
    el('td', { class: 'num', 'data-kv-hit': String(m.matched) }, percent(m.matched, m.decisions)),
    el('td', { class: 'num' }, m.meanMatchedRatio === null ? '—' : `${Math.round(m.meanMatchedRatio * 100)}% of the prompt`),
    el('td', null, `${fallen} `, reasons.length > 0 && el('span', { class: 'small' }, reasons.join(' · '))),
  );
}

/** Which tokenizer gives a model's token ids: one fetched from the Hub or a directory in process, or the engine's /tokenize. */
function kvTokenizerRow(t) {
  const inProcess = t.source === 'hub' || t.source === 'path';
  const words = { hub: 'Hub, in process', path: 'directory, in process', engine: "engine's /tokenize", off: 'off' };
  const badge = el(
    'span',
    { class: `badge ${inProcess ? 'state-ready' : t.reason ? 'state-loading' : 'state-scaled-to-zero'}` },
    words[t.source] ?? t.source,
  );
  return el(
    'tr',
    { 'data-kv-tokenizer': t.model, 'data-source': t.source },
    el('td', null, el('strong', null, t.model)),
    el('td', null, badge),
    el(
      'td',
      null,
      t.name ? el('span', { class: 'url' }, t.name) : el('span', { class: 'muted' }, '—'),
      t.revision && el('div', { class: 'small' }, `revision ${t.revision.slice(0, 12)}`),
    ),
    el('td', { class: 'small' }, t.namedBy),
    el('td', null, t.reason ? el('span', { class: 'small' }, t.reason) : el('span', { class: 'muted' }, '—')),
  );
}

function drawKv(kv) {
  page.kv.hidden = kv === null || kv === undefined;
  if (page.kv.hidden) return;
  const warnings = kv.warnings ?? [];
  page.kvWarnings.hidden = warnings.length === 0;
  page.kvWarnings.replaceChildren(...warnings.map((w) => el('li', { 'data-kv-warning': '' }, w)));
  page.kvTokenizers.replaceChildren(...(kv.tokenizers ?? []).map(kvTokenizerRow));
  page.kvEndpoints.replaceChildren(...kv.endpoints.map(kvEndpointRow));
  if (kv.endpoints.length === 0)
    page.kvEndpoints.replaceChildren(
      el('tr', null, el('td', { colspan: '7', class: 'muted' }, 'no endpoint names a KV-cache event stream')),
    );
  page.kvModels.replaceChildren(...kv.models.map(kvModelRow));
  if (kv.models.length === 0)
    page.kvModels.replaceChildren(el('tr', null, el('td', { colspan: '5', class: 'muted' }, 'no kvaware decision yet')));
}

function eventText(e) {
  switch (e.type) {
    case 'model-state':
      return `${e.model}: ${e.from ?? 'new'} → ${e.to ?? 'gone'} — ${e.reason}`;
    case 'endpoint-state':
      return `${e.endpoint}: ${e.from} → ${e.to}${e.reason ? ` — ${e.reason}` : ''}`;
    case 'endpoint-added':
      return `${e.endpoint} discovered (${e.source}), serving ${e.models.join(', ')}`;
    case 'endpoint-removed':
      return `${e.endpoint} removed (${e.source})`;
    case 'cold-start':
      return `${e.model}: ${e.kind === 'wake' ? 'woke from zero' : 'loaded'} in ${seconds(e.seconds)}${e.endpoint ? ` on ${e.endpoint}` : ''}`;
    case 'failover':
      return `${e.model}: ${e.count} request${e.count === 1 ? '' : 's'} retried on another endpoint`;
    case 'migration':
      return `${e.model}: ${[
        e.migrated > 0 &&
          `${e.migrated} stream${e.migrated === 1 ? '' : 's'} continued on another endpoint after the engine failed mid-way`,
        e.ended > 0 && `${e.ended} stream${e.ended === 1 ? '' : 's'} ended with an error event (not migrated)`,
      ]
        .filter(Boolean)
        .join('; ')}`;
    case 'wake-alarm':
      return e.raised
        ? `${e.model}: demand for ${seconds(e.demandForSeconds)} with no endpoint — check its autoscaler and workload`
        : `${e.model}: wake alarm cleared (${e.cleared === 'endpoint-appeared' ? 'an endpoint appeared' : 'demand ended'})`;
    case 'adapter-load':
      return e.result === 'failed' || e.result === 'unsupported'
        ? `${e.adapter}: load on ${e.endpoint} ${e.result === 'failed' ? 'failed' : 'not supported'} — ${e.detail}`
        : `${e.adapter}: loaded on ${e.endpoint} in ${seconds(e.seconds)}${e.result === 'already-loaded' ? ' (it was already)' : ''}`;
    case 'adapter-unload':
      return `${e.adapter}: unloaded from ${e.endpoint} (${e.reason})${e.ok ? '' : ` — the engine refused: ${e.detail}`}`;
    default:
      return e.type;
  }
}

function isWarning(e) {
  return (
    (e.type === 'wake-alarm' && e.raised) ||
    (e.type === 'adapter-load' && e.result === 'failed') ||
    (e.type === 'endpoint-state' && e.to === 'failed') ||
    (e.type === 'model-state' && e.to === 'unavailable') ||
    (e.type === 'migration' && e.ended > 0)
  );
}

function eventItem(e) {
  const time = new Date(e.at).toLocaleTimeString([], { hour12: false });
  return el(
    'li',
    { class: isWarning(e) ? 'warn' : '', 'data-type': e.type },
    el('span', { class: 'when', title: new Date(e.at).toISOString() }, time),
    el('span', { class: 'kind' }, e.type),
    eventText(e),
    e.worker !== undefined && el('span', { class: 'small' }, ` (worker ${e.worker})`),
  );
}

function drawState(state) {
  clockOffset = state.at - Date.now();
  const i = state.instance;
  page.instance.textContent = `v${i.version} · pid ${i.pid} · ${i.worker === null ? 'one process' : `worker ${i.worker} of ${i.workers}`}`;
  page.scope.textContent =
    i.workers > 1
      ? "Endpoint states, probes, Retry-After, cold starts, state changes, KV-cache event streams and kvaware decisions are what this worker sees (each worker probes the engines and follows their events itself); the timeline adds the other workers' failovers, migrations and adapter loads and unloads; held, in flight and demand are the whole instance."
      : '';
  page.models.replaceChildren(...state.models.map(modelRow));
  page.endpoints.replaceChildren(...state.endpoints.map(endpointRow));
  drawKv(state.kv);
  if (state.models.length === 0)
    page.models.replaceChildren(el('tr', null, el('td', { colspan: '9', class: 'muted' }, 'no model is declared or served')));
  if (state.endpoints.length === 0)
    page.endpoints.replaceChildren(el('tr', null, el('td', { colspan: '7', class: 'muted' }, 'no endpoint')));
}

function drawTimeline() {
  page.timeline.replaceChildren(...events.map(eventItem).reverse());
}

function connected(text, cls) {
  page.connection.textContent = text;
  page.connection.className = `connection ${cls}`;
}

const source = new EventSource('events');
source.addEventListener('open', () => connected('live', 'live'));
source.addEventListener('error', () =>
  connected(
    source.readyState === EventSource.CLOSED ? 'lost' : 'reconnecting',
    source.readyState === EventSource.CLOSED ? 'lost' : 'connecting',
  ),
);
source.addEventListener('snapshot', (m) => {
  const snapshot = JSON.parse(m.data);
  events = snapshot.timeline;
  drawState(snapshot.state);
  drawTimeline();
});
source.addEventListener('state', (m) => drawState(JSON.parse(m.data)));
source.addEventListener('timeline', (m) => {
  const e = JSON.parse(m.data);
  events.push(e);
  if (events.length > MAX_TIMELINE) events = events.slice(-MAX_TIMELINE);
  page.timeline.prepend(eventItem(e));
  while (page.timeline.childElementCount > MAX_TIMELINE) page.timeline.lastElementChild.remove();
});
setInterval(refreshAges, 1000);
