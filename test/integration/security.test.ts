// Issue 9 items 1-4: API keys, the admin port, limits, slow clients, graceful shutdown and safe logs.
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type net from 'node:net';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { request } from 'undici';
import { startCli, stopAll } from '../support/process.js';
import { exchange } from '../support/raw-http.js';
import { call, chat, simRequests, startRouter, waitModelStatus, type Running } from '../support/router.js';
import { startLocalSim, stopLocalSims } from '../support/sim-here.js';
import { until, within } from '../support/within.js';
import { scratchDir } from '../support/scratch.js';

const FAST = ['--probe-interval', '0.2', '--probe-ready-interval', '0.5'];

/**
 * A minimal OpenAI engine that records the headers of the requests it gets: `seen` every request but the probes'
 * /v1/models (the routers' engine-stats scrapes of /metrics included), `inference` only the inference POSTs. A
 * router scrapes /metrics every second on its own schedule, so "the request just forwarded" is `inference.at(-1)`:
 * `seen.at(-1)` may be a scrape that arrived in between, from another router, with other credentials.
 */
async function recordingEngine(
  model: string,
): Promise<{ url: string; seen: http.IncomingHttpHeaders[]; inference: http.IncomingHttpHeaders[]; close(): Promise<void> }> {
  const seen: http.IncomingHttpHeaders[] = [];
  const inference: http.IncomingHttpHeaders[] = [];
  const server = http.createServer((req, res) => {
    if (req.url === '/v1/models') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ object: 'list', data: [{ id: model, object: 'model' }] }));
      return;
    }
    seen.push(req.headers);
    if (req.method === 'POST') inference.push(req.headers);
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"ok":true}');
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as net.AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    inference,
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** Runs `start` when a test first asks for what it makes; every later asker gets the same promise. */
function shared<T>(start: () => Promise<T>): () => Promise<T> {
  let made: Promise<T> | undefined;
  return () => {
    made ??= start();
    return made;
  };
}

// three tests at a time (most of a test is waiting: a re-read of a keys file, a drain, a stream). A router whose flags
// only one test needs is that test's own and ends with it (killed, as stopAll does: a router left running keeps probing
// its engines). The shared routers below serve tests whose flags do not touch each other's subject, each test on a
// model and engine of its own (its own keys where keys are needed), and end with the file.
describe('security and limits', { timeout: 120_000, concurrency: 3 }, () => {
  const routers: Running[] = [];
  const engines: { close(): Promise<void> }[] = [];
  after(async () => {
    await Promise.all(routers.map((r) => r.stop()));
    await Promise.all(engines.map((e) => e.close()));
    await stopAll();
    await stopLocalSims();
  });
  const keep = (router: Running): Running => {
    routers.push(router);
    return router;
  };

  // the engine of the engine-key test, behind `secrets` (--engine-api-key) and `trusting` (--forward-client-auth)
  const authEngine = shared(async () => {
    const engine = await recordingEngine('key-m');
    engines.push(engine);
    return engine;
  });
  // the kv_transfer_params test's simulator, behind `limits` (the default: params dropped) and `trusting` (allowed)
  const kvSim = shared(() => startLocalSim(['--model', 'kv', '--output-tokens', '1']));

  /**
   * YAML keys (the YAML test rewrites the file) and keys from LLM_ROUTER_API_KEYS alone (no --api-key flag: the
   * env-only half of the first test). Model z has no engine: a request past the key gate is answered 503, one stopped
   * there 401.
   */
  const yamlKeys = shared(async () => {
    const file = path.join(scratchDir('keys-yaml-'), 'keys.yaml');
    writeFileSync(file, '- key: yaml-ok\n  tenant: acme\n  priority: 3\n- yaml-bare\n');
    const router = keep(await startRouter(['--known-models', 'z', '--api-keys-file', file], { LLM_ROUTER_API_KEYS: 'env-a,env-b' }));
    return { router, file };
  });

  /**
   * Client keys, the engine key, the admin port and debug logs: the engine-key test (model key-m, key client-secret),
   * the admin-port test (key k) and the logs test (model m on its own simulator, key CLIENTKEY123).
   */
  const secrets = shared(async () => {
    const [engine, sim] = await Promise.all([authEngine(), startLocalSim(['--model', 'm'])]);
    const router = keep(
      await startRouter([
        '--static-backends',
        `${sim.url},${engine.url}`,
        '--static-models',
        'm,key-m',
        '--admin-port',
        '0',
        '--api-key',
        'CLIENTKEY123,client-secret,k',
        '--engine-api-key',
        'ENGINEKEY123',
        '--log-level',
        'debug',
        ...FAST,
      ]),
    );
    return { router, sim, engine };
  });

  /** What a client may pass on: its own credentials (model key-m) and kv_transfer_params (model kv). */
  const trusting = shared(async () => {
    const [engine, sim] = await Promise.all([authEngine(), kvSim()]);
    const router = keep(
      await startRouter([
        '--static-backends',
        `${engine.url},${sim.url}`,
        '--static-models',
        'key-m,kv',
        '--forward-client-auth',
        '--allow-client-kv-transfer-params',
        ...FAST,
      ]),
    );
    return { router, engine, sim };
  });

  /**
   * A header limit and a 1 s client timeout (the limits test, model m: a stream longer than the timeout) and otherwise
   * the defaults (the kv_transfer_params test's strict router, model kv: its requests are small and sent whole).
   */
  const limits = shared(async () => {
    const [stream, sim] = await Promise.all([
      startLocalSim(['--model', 'm', '--ttft-ms', '10', '--itl-ms', '150', '--output-tokens', '12']),
      kvSim(),
    ]);
    const router = keep(
      await startRouter([
        '--static-backends',
        `${stream.url},${sim.url}`,
        '--static-models',
        'm,kv',
        '--max-header-bytes',
        '2048',
        '--client-timeout',
        '1',
        ...FAST,
      ]),
    );
    return { router, sim };
  });

  test('API keys from flags, env and a re-read file; constant answers for missing or wrong keys; probes stay public', async (t) => {
    const engine = await recordingEngine('m');
    const dir = scratchDir('keys-');
    const file = path.join(dir, 'keys');
    writeFileSync(file, '# clients\nfile-key-1\n\n');
    const router = await startRouter(
      ['--static-backends', engine.url, '--static-models', 'm', '--api-key', 'flag-key', '--api-keys-file', file, ...FAST],
      { LLM_ROUTER_API_KEYS: 'env-key' },
    );
    t.after(() => router.stop('SIGKILL'));
    try {
      await waitModelStatus(router.url, 'm', 'ready', 15_000, { authorization: 'Bearer flag-key' });
      const ask = (headers: Record<string, string>) => call(`${router.url}/v1/chat/completions`, { body: chat('m'), headers });
      const bad: Record<string, string>[] = [
        {},
        { authorization: 'Bearer nope' },
        { authorization: 'Basic flag-key' },
        { 'x-api-key': '' },
      ];
      for (const headers of bad) {
        const res = await ask(headers);
        assert.equal(res.status, 401, JSON.stringify(headers));
        assert.equal(res.json<{ error: { code: string } }>().error.code, 'invalid_api_key');
      }
      // flag and env both configure --api-key: the flag wins over env, as for every setting
      assert.equal((await ask({ authorization: 'Bearer flag-key' })).status, 200);
      assert.equal((await ask({ 'x-api-key': 'file-key-1' })).status, 200);
      assert.equal((await call(`${router.url}/health`)).status, 200);
      assert.equal((await call(`${router.url}/ready`)).status, 200);
      assert.equal((await call(`${router.url}/metrics`)).status, 401);
      assert.equal((await call(`${router.url}/v1/models`)).status, 401);
      assert.equal((await call(`${router.url}/metrics`, { headers: { authorization: 'Bearer flag-key' } })).status, 200);

      writeFileSync(file, 'file-key-2\n');
      await until('the new key works', async () => (await ask({ authorization: 'Bearer file-key-2' })).status === 200, 8_000, 200);
      assert.equal((await ask({ authorization: 'Bearer file-key-1' })).status, 401, 'the removed key does not');

      // the client's credentials never reach the engine; none were configured for it either
      assert.ok(engine.seen.length >= 3);
      assert.ok(engine.seen.every((h) => h.authorization === undefined && h['x-api-key'] === undefined));
    } finally {
      await router.stop();
      await engine.close();
    }
    // keys from LLM_ROUTER_API_KEYS alone, without the flag
    const { router: envOnly } = await yamlKeys();
    assert.equal(
      (await call(`${envOnly.url}/v1/chat/completions`, { body: chat('z'), headers: { authorization: 'Bearer env-b' } })).status,
      503,
    );
    assert.equal((await call(`${envOnly.url}/v1/chat/completions`, { body: chat('z') })).status, 401);
  });

  test('YAML --api-keys-file: a bad entry stops the start in one line without the key; a bad re-read keeps the keys', async () => {
    const refusedDir = scratchDir('keys-yaml-bad-');
    const refusedFile = path.join(refusedDir, 'keys.yaml');
    writeFileSync(refusedFile, '# tenants\n- key: yaml-ok\n  tenant: acme\n- key: yaml-secret-bad\n  tenant: beta\n  priority: urgent\n');
    const refused = startCli(['serve', '--host', '127.0.0.1', '--port', '0', '--known-models', 'z', '--api-keys-file', refusedFile]);
    const exited =
      refused.child.exitCode !== null
        ? Promise.resolve(refused.child.exitCode)
        : once(refused.child, 'exit').then(([code]) => code as number | null);
    assert.equal(await within(15_000, 'the router to exit', exited), 2);
    assert.equal(refused.output().trim().split('\n').length, 1, `one line, no stack: ${refused.output()}`);
    assert.match(
      refused.output(),
      /^llm-router: --api-keys-file .*keys\.yaml: entry 2 at line 4 \(tenant "beta"\): priority must be an integer from -1000 to 1000/,
    );
    assert.doesNotMatch(refused.output(), /yaml-secret-bad/);

    // started with '- key: yaml-ok\n  tenant: acme\n  priority: 3\n- yaml-bare\n' in the file
    const { router, file } = await yamlKeys();
    const ask = (key: string) =>
      call(`${router.url}/v1/chat/completions`, { body: chat('z'), headers: { authorization: `Bearer ${key}` } });
    // 503: the model has no engine; past the key gate
    assert.equal((await ask('yaml-ok')).status, 503);
    assert.equal((await ask('yaml-bare')).status, 503);
    assert.equal((await ask('- key: yaml-ok')).status, 401, 'not read as plain lines');
    writeFileSync(file, '- key: yaml-new-secret\n  trusted: perhaps\n');
    await router.proc.waitForOutput('API keys file is not valid; keeping the keys read last', 10_000);
    assert.match(router.proc.output(), /entry 1 at line 1: trusted must be true or false/);
    assert.doesNotMatch(router.proc.output(), /yaml-new-secret/);
    assert.equal((await ask('yaml-ok')).status, 503, 'the keys read last still work');
    assert.equal((await ask('yaml-new-secret')).status, 401);
  });

  test('the engine key replaces the client key unless --forward-client-auth', async () => {
    // --engine-api-key ENGINEKEY123 (client-secret is one of its client keys); the other forwards the client's key
    const [{ router: withKey, engine }, { router: forwarding }] = await Promise.all([secrets(), trusting()]);
    const auth = { authorization: 'Bearer client-secret' };
    await waitModelStatus(withKey.url, 'key-m', 'ready', 15_000, auth);
    await waitModelStatus(forwarding.url, 'key-m', 'ready');
    await call(`${withKey.url}/v1/chat/completions`, { body: chat('key-m'), headers: auth });
    assert.equal(engine.inference.length, 1);
    assert.equal(engine.inference.at(-1)?.authorization, 'Bearer ENGINEKEY123');
    await call(`${forwarding.url}/v1/chat/completions`, { body: chat('key-m'), headers: auth });
    assert.equal(engine.inference.length, 2);
    assert.equal(engine.inference.at(-1)?.authorization, 'Bearer client-secret');
  });

  test('--admin-port moves /metrics and /engines off the main port', async () => {
    const { router } = await secrets(); // --admin-port 0, k among its keys
    const adminUrl = /"adminUrl":"(http:[^"]+)"/.exec(router.proc.output())?.[1];
    assert.ok(adminUrl);
    assert.equal((await call(`${adminUrl}/metrics`)).status, 200, 'no key needed on the admin port');
    assert.equal((await call(`${adminUrl}/engines`)).status, 200);
    assert.equal((await call(`${router.url}/metrics`, { headers: { authorization: 'Bearer k' } })).status, 404);
    assert.equal((await call(`${adminUrl}/v1/chat/completions`, { body: chat('z') })).status, 404, 'no inference on the admin port');
  });

  test('rate limit per key answers 429 rate_limited with Retry-After; the concurrency cap answers 429 overloaded', async (t) => {
    const sim = await startLocalSim(['--model', 'm', '--ttft-ms', '800', '--output-tokens', '1']);
    t.after(() => sim.stop());
    // one router for both limits: the rate limit is checked first, and each refusal names its own code. The cap's
    // requests come with keys of their own (c, d, e), each with a full bucket, so that only the cap can refuse them.
    const router = await startRouter([
      '--static-backends',
      sim.url,
      '--static-models',
      'm',
      '--rate-limit-rps',
      '1',
      '--rate-limit-burst',
      '2',
      '--api-key',
      'a,b,c,d,e',
      '--max-concurrent-requests',
      '2',
      ...FAST,
    ]);
    t.after(() => router.stop('SIGKILL'));
    await waitModelStatus(router.url, 'm', 'ready', 15_000, { authorization: 'Bearer a' }); // /v1/models is not rate-limited
    const ask = (key: string) =>
      call(`${router.url}/v1/completions`, {
        body: JSON.stringify({ model: 'm', prompt: 'x' }),
        headers: { authorization: `Bearer ${key}` },
      });
    const burst = await Promise.all([ask('a'), ask('a'), ask('a')]);
    const statuses = burst.map((r) => r.status).sort();
    assert.deepEqual(statuses, [200, 200, 429]);
    const limited = burst.find((r) => r.status === 429)!;
    assert.equal(limited.json<{ error: { code: string } }>().error.code, 'rate_limited');
    assert.ok(Number(limited.headers['retry-after']) >= 1);
    assert.equal((await ask('b')).status, 200, 'another key has its own bucket');

    // --max-concurrent-requests 2
    const three = await Promise.all(['c', 'd', 'e'].map(ask));
    assert.deepEqual(three.map((r) => r.status).sort(), [200, 200, 429]);
    assert.equal(three.find((r) => r.status === 429)!.json<{ error: { code: string } }>().error.code, 'overloaded');
    assert.equal((await ask('c')).status, 200, 'slots are given back');
  });

  test('without keys the rate limit is per client address: made-up keys buy no bucket; X-Forwarded-For counts only from --trusted-proxies', async (t) => {
    const sim = await startLocalSim(['--model', 'm', '--output-tokens', '1']);
    t.after(() => sim.stop());
    const backends = ['--static-backends', sim.url, '--static-models', 'm', ...FAST];
    // both started at once: the second is used once the first's requests are over
    const [router, proxied] = await Promise.all([
      startRouter([...backends, '--rate-limit-rps', '2']),
      startRouter([...backends, '--rate-limit-rps', '0.2', '--rate-limit-burst', '1', '--trusted-proxies', '127.0.0.0/8,::1']),
    ]);
    t.after(() => Promise.all([router.stop('SIGKILL'), proxied.stop('SIGKILL')]));
    await waitModelStatus(router.url, 'm', 'ready');
    const ask = (url: string, headers: Record<string, string>) =>
      call(`${url}/v1/completions`, { body: JSON.stringify({ model: 'm', prompt: 'x' }), headers });
    // 30 requests at once, each with a key nobody configured: one address, one bucket of 2
    const madeUp = await Promise.all(
      Array.from({ length: 30 }, (_, i) => ask(router.url, i % 2 ? { authorization: `Bearer made-up-${i}` } : { 'x-api-key': `k${i}` })),
    );
    const limited = madeUp.filter((r) => r.status === 429).length;
    assert.ok(limited >= 20, `${limited} of 30 answered 429`);
    assert.equal(madeUp.filter((r) => r.status !== 429 && r.status !== 200).length, 0);

    // X-Forwarded-For from an untrusted peer names nobody
    const spoof = await Promise.all([1, 2, 3, 4].map((i) => ask(router.url, { 'x-forwarded-for': `10.9.0.${i}` })));
    assert.ok(
      spoof.some((r) => r.status === 429),
      'the header did not make four clients of one',
    );

    // behind a trusted proxy (the test's own 127.0.0.1): the right-most untrusted address is the client
    await waitModelStatus(proxied.url, 'm', 'ready');
    assert.equal((await ask(proxied.url, { 'x-forwarded-for': '10.0.0.1' })).status, 200);
    assert.equal((await ask(proxied.url, { 'x-forwarded-for': '10.0.0.2' })).status, 200, 'another client, its own bucket');
    assert.equal((await ask(proxied.url, { 'x-forwarded-for': '10.0.0.1' })).status, 429, 'the same client again');
    // a client that makes up an entry on the left is still itself (the entry the proxy appended, on the right)
    assert.equal((await ask(proxied.url, { 'x-forwarded-for': '10.7.7.7, 10.0.0.2' })).status, 429);
    // a trusted hop between is skipped
    assert.equal((await ask(proxied.url, { 'x-forwarded-for': '10.0.0.1, 127.0.0.5' })).status, 429);
    assert.equal((await ask(proxied.url, { 'x-forwarded-for': '10.0.0.3, 127.0.0.5' })).status, 200);
  });

  test("a client's kv_transfer_params never reach an engine (they name a host it connects to) unless --allow-client-kv-transfer-params", async () => {
    // model kv on one simulator behind both: without the flag, and with it
    const [{ router: strict, sim }, { router: lax }] = await Promise.all([limits(), trusting()]);
    await Promise.all([waitModelStatus(strict.url, 'kv', 'ready'), waitModelStatus(lax.url, 'kv', 'ready')]);
    const params = '{"do_remote_prefill":true,"remote_host":"10.9.9.9","remote_port":5600}';
    // the member in the middle, once under an escaped name: every byte but that member is kept
    const body = `{"model":"kv", "kv_transfer_params":${params},"prompt":"x","kv\u005ftransfer_params":${params} ,"max_tokens":1}`;
    const lastBody = async (): Promise<string> => (await simRequests(sim.url)).at(-1)?.body.toString() ?? '';
    const sent = await call(`${strict.url}/v1/completions`, { body });
    assert.equal(sent.status, 200, sent.text);
    assert.equal(await lastBody(), '{"model":"kv","prompt":"x" ,"max_tokens":1}');
    const plain = '{"model":"kv","prompt":"no params here", "max_tokens":1}';
    assert.equal((await call(`${strict.url}/v1/completions`, { body: plain })).status, 200);
    assert.equal(await lastBody(), plain, 'a body without them is forwarded as it came');
    assert.equal((await call(`${lax.url}/v1/completions`, { body })).status, 200);
    assert.equal(await lastBody(), body, 'allowed: the bytes as the client sent them');
  });

  test('oversized headers get 431 and a slow client 408, both OpenAI-shaped; a long stream is not cut by the client timeout', async () => {
    // --max-header-bytes 2048 --client-timeout 1; model m streams 12 tokens 150 ms apart
    const { router } = await limits();
    await waitModelStatus(router.url, 'm', 'ready');
    const big = await exchange(
      router.port,
      `POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(4096)}\r\nContent-Length: 2\r\n\r\n{}`,
    );
    assert.equal(big.status, 431);
    assert.match(big.body.toString('utf8'), /"code":"headers_too_large"/);

    const started = Date.now();
    const slow = await exchange(
      router.port,
      'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"model":',
      { timeoutMs: 10_000 },
    );
    assert.equal(slow.status, 408);
    assert.match(slow.body.toString('utf8'), /"code":"client_timeout"/);
    assert.ok(Date.now() - started < 6_000, 'answered within a few seconds of the 1 s timeout');

    const stream = await call(`${router.url}/v1/completions`, {
      body: JSON.stringify({ model: 'm', prompt: 'x', stream: true }),
      timeoutMs: 10_000,
    });
    assert.equal(stream.status, 200);
    assert.match(stream.text, /\[DONE\]/, 'a 1.8 s stream outlives the 1 s client timeout');
  });

  test('graceful shutdown: /ready 503 at once, serving through the drain, in-flight streams finish, exit 0', async (t) => {
    const sim = await startLocalSim(['--model', 'm', '--ttft-ms', '10', '--itl-ms', '100', '--output-tokens', '40']);
    t.after(() => sim.stop());
    // a 2 s drain and a 4 s stream: the stream is still running when the listener closes
    const router = await startRouter([
      '--static-backends',
      sim.url,
      '--static-models',
      'm',
      '--drain-seconds',
      '2',
      '--shutdown-timeout',
      '15',
      ...FAST,
    ]);
    t.after(() => router.stop('SIGKILL'));
    await waitModelStatus(router.url, 'm', 'ready');
    const stream = request(`${router.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', prompt: 'x', stream: true }),
    });
    const res = await stream;
    const text = res.body.text();
    const signalled = Date.now();
    router.proc.child.kill('SIGTERM');
    const exited = once(router.proc.child, 'exit');
    let ready = 200;
    while (ready !== 503 && Date.now() - signalled < 3_000) ready = (await call(`${router.url}/ready`)).status;
    assert.equal(ready, 503, '/ready turns 503 at once');
    assert.equal(
      (await call(`${router.url}/v1/completions`, { body: JSON.stringify({ model: 'm', prompt: 'x', max_tokens: 2 }) })).status,
      200,
      'still serving during the drain',
    );
    // the drain ends 2 s after the router handled the signal (a busy machine handles it later): from then on, new
    // connections are refused
    await until(
      'new connections refused once the drain is over',
      () =>
        call(`${router.url}/health`, { timeoutMs: 1_000 }).then(
          () => false,
          () => true,
        ),
      15_000,
    );
    assert.ok(Date.now() - signalled >= 1_900, `served through the 2 s drain (refused after ${Date.now() - signalled} ms)`);
    assert.match(await text, /\[DONE\]/, 'the in-flight stream finished');
    const [code] = await exited;
    assert.equal(code, 0);
  });

  test('logs: one access line per request with model, status, bytes and request id; never prompts or credentials, even at debug', async () => {
    // --log-level debug --engine-api-key ENGINEKEY123, CLIENTKEY123 among its keys; model m on a simulator of its own
    const { router, sim } = await secrets();
    await waitModelStatus(router.url, 'm', 'ready', 15_000, { authorization: 'Bearer CLIENTKEY123' });
    const res = await call(`${router.url}/v1/chat/completions`, {
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'TOPSECRETPROMPT' }] }),
      headers: { authorization: 'Bearer CLIENTKEY123', 'x-request-id': 'req-abc-1' },
    });
    assert.equal(res.status, 200);
    // the access line is written when the answer has been sent, and reaches us through a pipe: wait for it
    await router.proc.waitForOutput('"requestId":"req-abc-1"');
    const out = router.proc.output();
    const line = out.split('\n').find((l) => l.includes('"requestId":"req-abc-1"'));
    assert.ok(line, 'an access log line');
    const rec = JSON.parse(line) as Record<string, unknown>;
    assert.equal(rec.msg, 'request');
    assert.equal(rec.model, 'm');
    assert.equal(rec.status, 200);
    assert.equal(rec.endpoint, sim.url);
    assert.ok((rec.bytesIn as number) > 0 && (rec.bytesOut as number) > 0);
    for (const secret of ['TOPSECRETPROMPT', 'CLIENTKEY123', 'ENGINEKEY123', 'The quick brown'])
      assert.ok(!out.includes(secret), `${secret} is not logged`);
  });
});
