// Issue 17 checks against a real router process behind API keys: 404s that suggest the declared name and the access
// log that names it (metrics do not), /dashboard and /events refused without a key and served with one (Bearer, or
// Basic as a browser sends it), the /events stream of that router, and /engines as docs/operations.md documents it,
// with a start-up error shown as past once its endpoint is ready.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { freePort, stopAll } from '../support/process.js';
import { call, chat, FAST_PROBES, startRouter, startSim, type Running } from '../support/router.js';
import { eventually, until } from '../support/within.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const KEY = 'sk-operator';
const AUTH = { authorization: `Bearer ${KEY}` };

interface EngineJson {
  endpoints: Record<string, unknown>[];
  models: Record<string, unknown>[];
}

/** The fields docs/operations.md lists for /engines, as `prefix.field` rows of its table. */
function documentedFields(prefix: string): string[] {
  const doc = readFileSync(path.join(ROOT, 'docs', 'operations.md'), 'utf8');
  const section = doc.slice(doc.indexOf('### `GET /engines`'));
  const literal = prefix.replace(/[[\].]/g, '\\$&');
  return [...section.matchAll(new RegExp(`^\\| \`${literal}\\.(\\w+)\` \\|`, 'gm'))].map((m) => m[1] as string).sort();
}

describe('the operator view of a router behind API keys', { timeout: 90_000 }, () => {
  let router: Running;
  let enginePort: number;

  before(async () => {
    // nothing listens on the engine's port yet: the router records ECONNREFUSED (the last test starts the engine)
    enginePort = await freePort();
    router = await startRouter([
      '--static-backends',
      `http://127.0.0.1:${enginePort}`,
      '--static-models',
      'demo-chat',
      '--known-models',
      'demo-embed,zero',
      '--api-key',
      KEY,
      ...FAST_PROBES,
    ]);
  });
  after(stopAll);

  test('a 404 for demo-chta suggests demo-chat; the access log holds demo-chta, escaped and cut; metrics do not', async () => {
    const res = await call(`${router.url}/v1/chat/completions`, { body: chat('demo-chta'), headers: AUTH });
    assert.equal(res.status, 404);
    assert.deepEqual(res.json(), {
      error: {
        message: 'The model "demo-chta" does not exist. Did you mean "demo-chat"?',
        type: 'invalid_request_error',
        param: 'model',
        code: 'model_not_found',
      },
    });
    const far = await call(`${router.url}/v1/chat/completions`, { body: chat('gpt-4o'), headers: AUTH });
    assert.equal(far.json<{ error: { message: string } }>().error.message, 'The model "gpt-4o" does not exist.');
    const forged = `evil\n{"level":50,"msg":"forged"}\u001b[2J${'x'.repeat(300)}`;
    assert.equal((await call(`${router.url}/v1/chat/completions`, { body: chat(forged), headers: AUTH })).status, 404);

    const lines = (): Record<string, unknown>[] =>
      router.proc
        .output()
        .split('\n')
        .filter((l) => l.includes('"msg":"request"'))
        .map((l) => JSON.parse(l) as Record<string, unknown>);
    await until('three access-log lines', () => lines().filter((l) => l.status === 404).length === 3);
    const notFound = lines().filter((l) => l.status === 404);
    assert.deepEqual(
      notFound.slice(0, 2).map((l) => l.model),
      ['demo-chta', 'gpt-4o'],
    );
    const logged = notFound[2]!.model as string;
    assert.equal(logged, `evil\\u000a{"level":50,"msg":"forged"}\\u001b[2J${'x'.repeat(128 - 36)}`);
    assert.ok(!router.proc.output().includes('"msg":"forged"}\n'), 'no line was forged');

    const metrics = (await call(`${router.url}/metrics`, { headers: AUTH })).text;
    assert.ok(!metrics.includes('demo-chta') && !metrics.includes('gpt-4o') && !metrics.includes('evil'), 'no client-sent name in metrics');
    assert.match(metrics, /^llm_router_requests_total\{model="__unknown__",status="404"\} 3$/m);
    assert.match(metrics, /^llm_router_errors_total\{model="__unknown__",code="model_not_found"\} 3$/m);
  });

  test('/dashboard and /events answer 401 without a key (a browser is asked for it), and serve with Bearer or Basic', async () => {
    for (const p of ['/dashboard', '/dashboard/dashboard.js', '/dashboard/dashboard.css', '/events']) {
      const refused = await call(`${router.url}${p}`);
      assert.equal(refused.status, 401, p);
      assert.equal(refused.json<{ error: { code: string } }>().error.code, 'invalid_api_key');
      assert.equal(refused.headers['www-authenticate'], 'Basic realm="llm-router", charset="UTF-8"', p);
      assert.equal((await call(`${router.url}${p}`, { headers: { authorization: 'Bearer wrong' } })).status, 401);
    }
    assert.equal((await call(`${router.url}/engines`)).headers['www-authenticate'], 'Bearer', 'API routes keep their challenge');
    const page = await call(`${router.url}/dashboard`, { headers: AUTH });
    assert.equal(page.status, 200);
    assert.equal(page.headers['content-type'], 'text/html; charset=utf-8');
    assert.match(String(page.headers['content-security-policy']), /default-src 'none'; script-src 'self'/);
    // nothing from another origin: every src and href is relative (or the empty data: icon)
    for (const m of page.text.matchAll(/(?:src|href)="([^"]*)"/g)) assert.match(m[1]!, /^(dashboard\/[\w.]+|data:,)$/);
    const slash = await call(`${router.url}/dashboard/`, { headers: AUTH });
    assert.equal(slash.status, 301);
    assert.equal(new URL(String(slash.headers.location), `${router.url}/dashboard/`).href, `${router.url}/dashboard`);
    const basic = `Basic ${Buffer.from(`operator:${KEY}`).toString('base64')}`;
    assert.equal((await call(`${router.url}/dashboard/dashboard.js`, { headers: { authorization: basic } })).status, 200);

    // a request whose prompt and key must never reach the operator's view
    const prompt = 'PROMPT-MARKER-5d1f';
    const body = JSON.stringify({ model: 'demo-chat', messages: [{ role: 'user', content: prompt }] });
    await call(`${router.url}/v1/chat/completions`, { body, headers: AUTH });
    const events = await request(`${router.url}/events`, { headers: { authorization: basic } });
    assert.equal(events.statusCode, 200);
    assert.equal(events.headers['content-type'], 'text/event-stream; charset=utf-8');
    let text = '';
    for await (const chunk of events.body) {
      text += chunk.toString();
      if (text.includes('event: snapshot\n') && text.endsWith('\n\n')) break;
    }
    assert.ok(!text.includes(prompt) && !text.includes(KEY), 'no prompt, no key');
    const snapshot = JSON.parse(/event: snapshot\ndata: (.*)\n/.exec(text)![1]!) as {
      state: { models: { id: string; status: string; retryAfterSeconds: number | null }[] };
      timeline: { type: string }[];
    };
    assert.deepEqual(snapshot.state.models.map((m) => m.id).sort(), ['demo-chat', 'demo-embed', 'zero']);
    const zero = snapshot.state.models.find((m) => m.id === 'zero')!;
    assert.equal(zero.status, 'scaled-to-zero');
    assert.ok((zero.retryAfterSeconds ?? 0) >= 1);
    assert.ok(snapshot.timeline.some((e) => e.type === 'model-state'));
    assert.equal((snapshot.state as { kv?: unknown }).kv, null, 'no kv part without kvaware');
    events.body.destroy();
  });

  test('/engines: the documented fields, and the start-up error with its time, shown as past once ready', async () => {
    const refused = await eventually(
      'the refused connection recorded',
      async () => (await call(`${router.url}/engines`, { headers: AUTH })).json<EngineJson>().endpoints[0]!,
      (e) => /ECONNREFUSED/.test(String(e.lastError)),
      15_000,
    );
    assert.equal(refused.state, 'discovered');
    assert.equal(refused.lastErrorPast, false, 'while the engine is starting the error is the present');
    await startSim(['--model', 'demo-chat'], { port: enginePort });
    const engines = await eventually(
      'the engine ready after refusing, and its load scraped',
      async () => (await call(`${router.url}/engines`, { headers: AUTH })).json<EngineJson>(),
      // and scraped once, so that every field has its value
      (v) => v.endpoints[0]?.state === 'ready' && v.endpoints[0]?.load !== null,
      20_000,
    );
    const e = engines.endpoints[0]!;
    // fields present only for some endpoints and models (aliases; P/D roles' probe port, bootstrap port, pair state;
    // adapters; KV-cache event streams and the tokenizer, with kvaware)
    const optional = (k: string): boolean =>
      !['aliasOf', 'probeUrl', 'bootstrapPort', 'pd', 'adapter', 'kvEvents', 'tokenizer', 'unreachable', 'why'].includes(k);
    assert.deepEqual(Object.keys(e).sort(), documentedFields('endpoints[]').filter(optional));
    assert.deepEqual(Object.keys(engines.models[0]!).filter(optional).sort(), documentedFields('models[]').filter(optional));
    assert.deepEqual(Object.keys(e.lastProbe as object).sort(), documentedFields('endpoints[].lastProbe'));
    assert.deepEqual(Object.keys(e.load as object).sort(), documentedFields('endpoints[].load'));
    assert.match(String(e.lastError), /ECONNREFUSED/);
    assert.ok(Date.parse(String(e.lastErrorAt)) < Date.parse(String(e.since)), 'the error came before the endpoint became ready');
    assert.equal(e.lastErrorPast, true);
  });
});
