// Issue 3 checks: route only to engines whose model is loaded; rollouts lose nothing; failover; timeouts.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort, stopAll } from '../support/process.js';
import {
  allReady,
  call,
  chat,
  endpointState,
  engines,
  FAST_PROBES,
  simStats,
  startRouter,
  startSim,
  streamOn,
  type Running,
  waitModelStatus,
} from '../support/router.js';
import { startLocalSim, stopLocalSims, type LocalSim } from '../support/sim-here.js';
import { until } from '../support/within.js';

/** Sends requests at a steady pace until stopped; records every status and the engine that answered. */
function steadyTraffic(router: string, model: string, everyMs: number) {
  const results: { status: number; engine: string | undefined; at: number; code?: string; state?: string }[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const res = await call(`${router}/v1/chat/completions`, { body: chat(model), timeoutMs: 10_000 }).catch((err: Error) => ({
        status: -1,
        headers: {} as Record<string, string | undefined>,
        text: err.message,
        json: () => ({}) as never,
      }));
      const entry: (typeof results)[number] = {
        status: res.status,
        engine: res.headers['x-sim-engine'] as string | undefined,
        at: Date.now(),
      };
      if (res.status !== 200) {
        try {
          entry.code = (JSON.parse(res.text) as { error: { code: string } }).error.code;
        } catch {
          entry.code = res.text.slice(0, 80);
        }
        entry.state = res.headers['x-llm-router-model-state'] as string | undefined;
      }
      results.push(entry);
      await sleep(everyMs); // the pace of the traffic, not a wait for anything
    }
  })();
  return {
    results,
    async stop() {
      running = false;
      await loop;
      return results;
    },
  };
}

// The three groups run at the same time: each has its own router and engines.
describe('readiness', { concurrency: true }, () => {
  after(async () => {
    await stopAll();
    await stopLocalSims();
  });
  // One router for the three tests, each on its own model: m (old, and new on newPort), slow (on slowPort) and k (a and
  // b). The engines of newPort and slowPort start in their tests; until then the router probes a refused port, which
  // leaves an endpoint that was never ready coming up (probed every --probe-interval), as a router started then would.
  // No scheduled probe of a ready engine at this router (--probe-ready-interval 300): only the failed requests can make
  // the router notice the engine killed in the third test; an endpoint that is coming up is probed every 0.2 s all the same.
  describe('readiness, lifecycle and failover', { timeout: 150_000, concurrency: 1 }, () => {
    let router: Running;
    let old: LocalSim;
    let newPort: number;
    let slowPort: number;
    let a: Running;
    let b: LocalSim;
    before(async () => {
      [old, b, a, newPort, slowPort] = await Promise.all([
        startLocalSim(['--model', 'm', '--id', 'old', '--ttft-ms', '5', '--itl-ms', '1']),
        startLocalSim(['--model', 'k', '--id', 'b', '--ttft-ms', '5', '--itl-ms', '1']),
        startSim(['--model', 'k', '--id', 'a', '--ttft-ms', '5', '--itl-ms', '100', '--output-tokens', '40']),
        freePort(),
        freePort(),
      ]);
      router = await startRouter([
        '--static-backends',
        `${old.url},http://127.0.0.1:${newPort},http://127.0.0.1:${slowPort},${a.url},${b.url}`,
        '--static-models',
        'm,m,slow,k,k',
        ...FAST_PROBES,
        '--probe-ready-interval',
        '300',
      ]);
    });
    // the other groups run on: stop only this group's router (the file's after stops everything else)
    after(async () => {
      await router.stop();
    });

    test('rollout: a second engine that refuses then loads never fails a request and gets traffic soon after it is ready', async () => {
      await waitModelStatus(router.url, 'm', 'ready');
      const traffic = steadyTraffic(router.url, 'm', 20);
      // resolves once it listens, after refusing connections for 1 s
      const fresh = await startLocalSim(
        [
          '--model',
          'm',
          '--id',
          'new',
          '--startup-refuse-seconds',
          '1',
          '--startup-loading-seconds',
          '1',
          '--ttft-ms',
          '5',
          '--itl-ms',
          '1',
        ],
        newPort,
      );
      const engineReadyAt = Date.now() + 1_000; // the end of its loading phase
      await endpointState(router.url, fresh.url, 'ready');
      // then until the new engine has answered a few of the steady requests
      await until('the new engine serving', () => traffic.results.filter((r) => r.engine === 'new').length >= 3);
      const results = await traffic.stop();
      const failures = results.filter((r) => r.status !== 200);
      assert.deepEqual(failures, [], 'not one client request failed');
      const firstNew = results.find((r) => r.engine === 'new');
      assert.ok(firstNew, 'the new engine received traffic');
      // two probe intervals (2 x 0.2 s) after it became ready, plus generous slack for a busy machine
      assert.ok(
        firstNew.at - engineReadyAt < 400 + 2_500,
        `first request on the new engine ${firstNew.at - engineReadyAt} ms after it was ready`,
      );
      const seenStates = await call(`${router.url}/engines`);
      assert.match(seenStates.text, /"state":"ready"/);
    });

    test('only a loading engine: 503 model_unavailable + Retry-After + state loading, then 200 once loaded', async () => {
      const port = slowPort;
      const listening = startLocalSim(['--model', 'slow', '--startup-refuse-seconds', '1', '--startup-loading-seconds', '1'], port);
      const traffic = steadyTraffic(router.url, 'slow', 50);
      await listening;
      await waitModelStatus(router.url, 'slow', 'ready', 15_000);
      await until('a few requests answered once it is ready', () => traffic.results.filter((r) => r.status === 200).length >= 3);
      const results = await traffic.stop();
      const firstOk = results.findIndex((r) => r.status === 200);
      assert.ok(firstOk > 0, 'some requests came before the engine was ready');
      for (const r of results.slice(0, firstOk)) {
        assert.equal(r.status, 503);
        assert.equal(r.code, 'model_unavailable');
        assert.equal(r.state, 'loading');
      }
      assert.ok(
        results.slice(firstOk).every((r) => r.status === 200),
        'all 200 once loaded',
      );
      const one = await call(`${router.url}/v1/chat/completions`, { body: chat('slow') });
      assert.equal(one.status, 200);
    });

    test('an engine killed mid-run: pending requests succeed elsewhere, a started stream ends with an error event, the engine is failed without waiting for its next probe', async () => {
      // no scheduled probe of a ready engine within the test (--probe-ready-interval 300): only the failed requests can
      // make the router notice
      await endpointState(router.url, a.url, 'ready');
      await endpointState(router.url, b.url, 'ready');

      const stream = await streamOn(router.url, 'k', 'a', { max_tokens: 40 });
      const it = stream.body[Symbol.asyncIterator]();
      const first = await it.next();
      assert.ok(!first.done);
      const killedAt = Date.now();
      await a.stop('SIGKILL');
      let rest = String(first.value);
      for (let r = await it.next(); !r.done; r = await it.next()) rest += String(r.value);
      assert.match(rest, /data: \{"error":\{[^\n]*"code":"upstream_stream_error"/, 'the stream ends with an SSE error event');
      assert.doesNotMatch(rest, /\[DONE\]/);

      const results = await Promise.all(Array.from({ length: 6 }, () => call(`${router.url}/v1/chat/completions`, { body: chat('k') })));
      assert.deepEqual(
        results.map((r) => r.status),
        [200, 200, 200, 200, 200, 200],
      );
      assert.ok(results.every((r) => r.headers['x-sim-engine'] === 'b'));
      // The window starts before the kill and covers the process exit, the stream and the 6 requests above, which a
      // busy machine slows down: a generous deadline. What it proves does not depend on it: the next scheduled probe
      // is 300 s away, so 'failed' comes from the passive failures (and the probe they trigger) or not at all.
      await endpointState(router.url, a.url, 'failed', Math.max(1, 10_000 - (Date.now() - killedAt)));
    });
  });

  // Three engines that misbehave in different ways, each serving its own model, behind one router: each test reads
  // only its own model's answers and engines.
  describe('readiness: engines that hang, stall or push back', { timeout: 60_000, concurrency: 1 }, () => {
    let router: Running;
    let hung: LocalSim;
    let fine: LocalSim;
    let stalling: LocalSim;
    let busy: LocalSim;
    let free: LocalSim;
    before(async () => {
      [hung, fine, stalling, busy, free] = await Promise.all([
        startLocalSim(['--model', 'h', '--fault', 'hang']),
        startLocalSim(['--model', 'f']),
        startLocalSim(['--model', 's', '--fault', 'slow-chunks', '--fault-delay-ms', '1500']),
        startLocalSim(['--model', 'o', '--id', 'busy', '--fault', 'overloaded']),
        startLocalSim(['--model', 'o', '--id', 'free']),
      ]);
      // --response-timeout: until the response headers; --idle-timeout: between two chunks, once they came
      router = await startRouter([
        '--static-backends',
        [hung, fine, stalling, busy, free].map((e) => e.url).join(','),
        '--static-models',
        'h,f,s,o,o',
        '--response-timeout',
        '1',
        '--idle-timeout',
        '0.5',
        ...FAST_PROBES,
      ]);
      await allReady(router.url, 5);
    });
    after(async () => {
      await router.stop();
    });

    test('a hung engine: clients get 504 upstream_timeout within the configured time, and other models keep being served', async () => {
      const started = Date.now();
      const [slow, ok] = await Promise.all([
        call(`${router.url}/v1/chat/completions`, { body: chat('h'), timeoutMs: 10_000 }),
        call(`${router.url}/v1/chat/completions`, { body: chat('f') }),
      ]);
      const took = Date.now() - started;
      assert.equal(slow.status, 504);
      assert.equal(slow.json<{ error: { code: string } }>().error.code, 'upstream_timeout');
      assert.ok(took >= 900 && took < 5_000, `504 after about 1 s (took ${took} ms)`);
      assert.equal(ok.status, 200);
      const inFlight = (await engines(router.url)).filter((e) => e.url === hung.url || e.url === fine.url).map((e) => e.inFlight);
      assert.deepEqual(inFlight, [0, 0]);
    });

    test('a stream that stalls longer than the idle timeout ends with an SSE timeout event', async () => {
      assert.equal((await engines(router.url)).find((e) => e.url === stalling.url)?.state, 'ready');
      const res = await call(`${router.url}/v1/chat/completions`, { body: chat('s', { stream: true }), timeoutMs: 10_000 });
      assert.equal(res.status, 200);
      assert.match(res.text, /"code":"upstream_timeout"/);
    });

    test('engine 503 while loading or overloaded fails over before any byte reaches the client', async () => {
      const results = await Promise.all(Array.from({ length: 6 }, () => call(`${router.url}/v1/chat/completions`, { body: chat('o') })));
      assert.deepEqual(
        results.map((r) => [r.status, r.headers['x-sim-engine']]),
        Array(6).fill([200, 'free']),
      );
      assert.match((await call(`${router.url}/metrics`)).text, /llm_router_failovers_total\{model="o"\} [1-9]/);
      // back-pressure says nothing against the engine's health
      assert.equal((await engines(router.url)).find((e) => e.url === busy.url)?.state, 'ready');
      assert.ok(free.engine.stats().received >= 6);
    });
  });

  describe('probe semantics per engine kind', { timeout: 120_000, concurrency: true }, () => {
    for (const kind of ['vllm', 'sglang', 'tgi'] as const) {
      test(`${kind}: loading is not ready; ready once loaded`, async () => {
        const port = await freePort();
        const router = await startRouter([
          '--static-backends',
          `http://127.0.0.1:${port}`,
          '--static-models',
          'kind-model',
          '--engine-kind',
          kind,
          ...FAST_PROBES,
        ]);
        await startLocalSim(['--model', 'kind-model', '--engine-kind', kind, '--startup-loading-seconds', '2.5'], port);
        await endpointState(router.url, `http://127.0.0.1:${port}`, 'serving-api');
        assert.equal(
          (await call(`${router.url}/v1/chat/completions`, { body: chat('kind-model') })).headers['x-llm-router-model-state'],
          'loading',
        );
        await waitModelStatus(router.url, 'kind-model', 'ready', 15_000);
      });
    }

    // one router for the next two tests, each reading its own engine and model: qwen3-8b (an engine that serves another
    // name) and keyed (an engine key in the router's environment)
    describe('one router, two engines', () => {
      let router: Running;
      let qwen: LocalSim;
      let keyed: LocalSim;
      before(async () => {
        [qwen, keyed] = await Promise.all([startLocalSim(['--model', 'Qwen/Qwen3-8B']), startLocalSim(['--model', 'keyed'])]);
        // a wait for engines that are not ready changes nothing for a mismatch: the 503 comes at once
        router = await startRouter(
          ['--static-backends', `${qwen.url},${keyed.url}`, '--static-models', 'qwen3-8b,keyed', '--cold-start-wait', '60', ...FAST_PROBES],
          { VLLM_API_KEY: 'sekret' },
        );
      });

      test('a name mismatch is said at once: /v1/models lists another model = unavailable, naming it, one WARN line', async () => {
        const sim = qwen;
        const e = await endpointState(router.url, sim.url, 'failed');
        assert.match(String(e?.lastError), /lists \[Qwen\/Qwen3-8B\], not qwen3-8b/);
        const started = Date.now();
        const res = await call(`${router.url}/v1/chat/completions`, { body: chat('qwen3-8b') });
        assert.ok(Date.now() - started < 5_000, 'not held');
        assert.equal(res.status, 503);
        assert.equal(res.headers['x-llm-router-model-state'], 'unavailable');
        assert.ok(Number(res.headers['retry-after']) >= 1);
        assert.equal((res.json() as { error: { code: string } }).error.code, 'model_unavailable');
        assert.match(res.text, /no ready engine \(unavailable: the engine serves \\"Qwen\/Qwen3-8B\\"; declare that name or an alias\)/);
        assert.ok(!res.text.includes(sim.url.replace('http://', '')), 'no engine address');
        const listed = (await call(`${router.url}/v1/models`)).json() as { data: { id: string; status: string; reason?: string }[] };
        const model = listed.data.find((m) => m.id === 'qwen3-8b');
        assert.equal(model?.status, 'unavailable');
        assert.equal(model?.reason, 'unavailable: the engine serves "Qwen/Qwen3-8B"; declare that name or an alias');
        // one WARN line for the endpoint and model, however many probes see it: a few more probes of the engine first
        const probes = (): number => sim.engine.stats().byPath['/v1/models'] ?? 0;
        const seen = probes();
        await until('three more probes of the engine', () => probes() >= seen + 3, 10_000);
        const warns = router.proc
          .output()
          .split('\n')
          .filter((l) => l.includes('engine serves a different model'));
        assert.equal(warns.length, 1, warns.join('\n'));
        assert.match(warns[0] as string, /"level":40/);
        // "did you mean" compares names without their organisation prefix: the engine's name finds the declared one
        const missing = await call(`${router.url}/v1/chat/completions`, { body: chat('Qwen/Qwen3-8B') });
        assert.equal(missing.status, 404);
        assert.match(missing.text, /Did you mean \\"qwen3-8b\\"/);
      });

      test('probes never send inference, and the engine key never reaches the logs', async () => {
        const sim = keyed;
        await waitModelStatus(router.url, 'keyed', 'ready');
        // a few probe rounds later (the engine counts every request by path)
        const probed = (await simStats(sim.url)).byPath['/v1/models'] ?? 0;
        await until('two more probes', async () => ((await simStats(sim.url)).byPath['/v1/models'] ?? 0) >= probed + 2);
        const stats = await simStats(sim.url);
        assert.equal(stats.received, 0, 'no inference request from probes');
        assert.doesNotMatch(router.proc.output(), /sekret/);
      });
    });
  });
});
