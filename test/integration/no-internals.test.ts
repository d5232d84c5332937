// Issue 32: clients get no internals. Each way an engine can fail (its connection refused, its socket reset mid-stream,
// no answer in time, a 5xx of its own, a TLS handshake that fails, a name mismatch) is driven through one router, and
// no answer a client gets (status line, headers, body, the SSE error event, /v1/models) carries an engine's address or
// port or the transport error's words; /engines, the operator's view, keeps them.
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { request } from 'undici';
import { freePort, stopAll } from '../support/process.js';
import { type Answer, call, chat, FAST_PROBES, setFault, startRouter, waitModelStatus } from '../support/router.js';
import { startSimHere, stopSimsHere } from '../support/sim-here.js';
import { until } from '../support/within.js';

/** What no client answer may carry: the engines' host:port, and the words of transport errors. */
function leaks(text: string, ports: readonly number[]): string[] {
  const found = ports.filter((p) => text.includes(`127.0.0.1:${p}`) || text.includes(`:${p}/`)).map((p) => `127.0.0.1:${p}`);
  for (const word of ['ECONNREFUSED', 'ECONNRESET', 'EPROTO', 'ETIMEDOUT', 'UND_ERR', 'socket hang up', 'wrong version number'])
    if (text.includes(word)) found.push(word);
  return found;
}

function whole(a: Answer): string {
  return `${a.status}\n${JSON.stringify(a.headers)}\n${a.text}`;
}

describe('clients get no internals', { timeout: 90_000 }, () => {
  // the engines run in this process (their faults are the simulator's own, switched over HTTP); the router is a process
  after(() => Promise.all([stopAll(), stopSimsHere()]));

  test('refused, reset mid-stream, timed out, engine 5xx, TLS error, name mismatch: no client answer names an engine', async () => {
    const [refuse, reset, hang, error500, renamed, plain] = await Promise.all([
      startSimHere(['--model', 'refuse']),
      startSimHere(['--model', 'reset', '--itl-ms', '20']),
      startSimHere(['--model', 'hang']),
      startSimHere(['--model', 'error500']),
      startSimHere(['--model', 'Org/Other']),
      // a plain HTTP engine named https: every TLS handshake with it fails
      startSimHere(['--model', 'tls']),
    ]);
    const gone = await freePort();
    const backends: Record<string, string> = {
      refuse: refuse.url,
      reset: reset.url,
      hang: hang.url,
      error500: error500.url,
      renamed: renamed.url,
      tls: plain.url.replace('http://', 'https://'),
      gone: `http://127.0.0.1:${gone}`,
    };
    const ports = [refuse.port, reset.port, hang.port, error500.port, renamed.port, plain.port, gone];
    const router = await startRouter([
      '--static-backends',
      Object.values(backends).join(','),
      '--static-models',
      Object.keys(backends).join(','),
      '--response-timeout',
      '1',
      '--max-instance-failover-reroute-attempts',
      '0',
      ...FAST_PROBES,
    ]);
    const started = Date.now();
    await Promise.all(['refuse', 'reset', 'hang', 'error500'].map((m) => waitModelStatus(router.url, m, 'ready', 15_000)));
    const answers: Array<[string, string]> = [];
    const ask = async (what: string, model: string, extra: Record<string, unknown> = {}): Promise<Answer> => {
      const a = await call(`${router.url}/v1/chat/completions`, { body: chat(model, extra), timeoutMs: 15_000 });
      answers.push([what, whole(a)]);
      return a;
    };

    // a 5xx of the engine's own is its answer, passed on as it came
    assert.equal((await ask('engine 5xx', 'error500')).status, 200);
    await setFault(error500.url, { mode: 'error500' });
    assert.equal((await ask('engine 5xx', 'error500')).status, 500);

    // no response headers in time: 504
    await setFault(hang.url, { mode: 'hang' });
    const late = await ask('timeout', 'hang');
    assert.equal(late.status, 504);
    assert.equal(late.json<{ error: { code: string } }>().error.code, 'upstream_timeout');

    // the socket reset mid-stream: the router's SSE error event ends the stream; a reset before any byte: 502 or 503
    await setFault(reset.url, { mode: 'reset-mid-stream', afterChunks: 1 });
    const stream = await request(`${router.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: chat('reset', { stream: true, max_tokens: 40 }),
      bodyTimeout: 15_000,
      headersTimeout: 15_000,
    });
    const events = await stream.body.text();
    answers.push(['reset mid-stream', `${stream.statusCode}\n${JSON.stringify(stream.headers)}\n${events}`]);
    assert.equal(stream.statusCode, 200);
    assert.match(events, /"code":"upstream_stream_error"/);
    assert.ok([502, 503].includes((await ask('reset', 'reset')).status));

    // the connection refused: the endpoint is failed at once, the model unavailable and unreachable
    await setFault(refuse.url, { mode: 'refuse' });
    const refused = await ask('refused', 'refuse');
    assert.ok([502, 503].includes(refused.status), whole(refused));
    await waitModelStatus(router.url, 'refuse', 'unavailable', 15_000);
    const unreachable = await ask('refused', 'refuse');
    assert.equal(unreachable.status, 503);
    assert.match(unreachable.text, /\(unreachable( for \d+ s)?\); retry after/);

    // a name mismatch names what the engine serves, not where it is
    await waitModelStatus(router.url, 'renamed', 'unavailable', 15_000);
    assert.match((await ask('name mismatch', 'renamed')).text, /the engine serves \\"Org\/Other\\"/);

    // a TLS handshake that fails and a port nobody listens on: unreachable once their start-up grace (10 s) is over
    await until(
      'the TLS engine and the silent port said unreachable',
      async () => {
        const listed = await call(`${router.url}/v1/models`);
        const data = listed.json<{ data: { id: string; reason?: string }[] }>().data;
        return ['tls', 'gone'].every((m) => data.find((d) => d.id === m)?.reason?.startsWith('unreachable'));
      },
      30_000,
      250,
    );
    assert.ok(Date.now() - started < 45_000);
    for (const m of ['tls', 'gone']) assert.match((await ask('unreachable', m)).text, /\(unreachable for \d+ s\)/);
    const listed = await call(`${router.url}/v1/models`);
    answers.push(['/v1/models', whole(listed)]);

    for (const [what, text] of answers) assert.deepEqual(leaks(text, ports), [], `${what}: ${text}`);

    // the operator's view keeps what the clients do not get
    const engines = (await call(`${router.url}/engines`)).text;
    assert.ok(engines.includes(`127.0.0.1:${refuse.port}`) && engines.includes(`127.0.0.1:${gone}`));
    assert.match(engines, /ECONNREFUSED/);
    assert.match(engines, /TLS error/);
    await router.stop();
  });
});
