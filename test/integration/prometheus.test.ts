// The router as Prometheus and KEDA's prometheus trigger see it: a real Prometheus scrapes it, every PromQL expression
// the docs and the chart give is evaluated, the trigger wakes a model at zero from its first request, and promtool
// finds nothing wrong with the exposition.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startPrometheus, promtoolCheckMetrics, promtoolCheckRules, type Prometheus } from '../support/prometheus.js';
import { asGrafanaSends, documentedPromql, forModel, type PromqlSource } from '../support/promql-sources.js';
import { stopAll } from '../support/process.js';
import { call, chat, startRouter, startSim, type Running } from '../support/router.js';
import { until } from '../support/within.js';
import { requireTool } from '../support/tools.js';

const SCRAPE_SECONDS = 1;

describe('Prometheus and promtool against a real router', { timeout: 120_000, skip: requireTool('prometheus', 'promtool') }, () => {
  let router: Running;
  let prom: Prometheus;
  let sources: PromqlSource[];
  /** the KEDA trigger wherever it is given (the dashboard's demand panel is a graph, not a trigger) */
  const triggers = (): PromqlSource[] =>
    sources.filter((s) => !s.alert && !s.where.startsWith('deploy/grafana/') && /llm_router_model_demand_total/.test(s.expr));
  const value = async (expr: string): Promise<number | undefined> => {
    const r = await prom.query(expr);
    assert.equal(r.status, 'success', `${expr}: ${r.error}`);
    return r.samples[0]?.value;
  };

  const dir = mkdtempSync(path.join(tmpdir(), 'prometheus-test-'));

  before(async () => {
    sources = documentedPromql();
    const sim = await startSim(['--model', 'served']);
    // a settings file followed: its reload metrics are in the exposition promtool checks
    const config = path.join(dir, 'router.yaml');
    writeFileSync(config, 'retry-after: 5\n');
    router = await startRouter([
      '--config',
      config,
      '--static-backends',
      sim.url,
      '--static-models',
      'served',
      '--known-models',
      'zero,held',
      '--cold-start-wait-per-model',
      'held=60',
      '--cold-start-queue-size',
      '1',
      '--admin-port',
      '0',
    ]);
    prom = await startPrometheus([new URL(router.adminUrl).host], SCRAPE_SECONDS);
    // the series of a declared model exist at 0 before anyone asked for it: the trigger reads 0 (not an empty
    // result) once Prometheus has two samples of it, which rate() needs
    await until(
      'the trigger reads 0 for a model nobody asked for',
      async () => (await value(forModel(triggers()[0]!.expr, 'zero'))) === 0,
      30_000,
      200,
    );
  });
  after(async () => {
    await prom?.stop();
    await stopAll();
    rmSync(dir, { recursive: true, force: true });
  });

  test('the documents give the same trigger everywhere, and every expression evaluates', async () => {
    assert.ok(triggers().length >= 3, `docs, the example and the chart each give the trigger: ${sources.map((s) => s.where).join(', ')}`);
    const canonical = new Set(triggers().map((s) => forModel(s.expr, 'X').replace(/\s+/g, ' ')));
    assert.equal(canonical.size, 1, `one trigger, not variants: ${[...canonical].join('\n')}`);
    for (const s of sources) {
      const r = await prom.query(asGrafanaSends(forModel(s.expr, 'zero'), 'zero'));
      assert.equal(r.status, 'success', `${s.where}: ${s.expr}: ${r.error}`);
    }
  });

  test('the Grafana dashboard: every expression evaluates, for one model and for all, and every metric it names exists', async () => {
    const dashboard = sources.filter((s) => s.where.startsWith('deploy/grafana/'));
    assert.ok(dashboard.length >= 20, `the dashboard's expressions were collected: ${dashboard.length}`);
    assert.ok(dashboard.some((s) => s.expr.includes('$model') && s.expr.includes('$__rate_interval')));
    for (const s of dashboard)
      for (const model of ['served', '.*']) {
        const r = await prom.query(asGrafanaSends(s.expr, model));
        assert.equal(r.status, 'success', `${s.expr} (model ${model}): ${r.error}`);
      }
    // a misspelled metric is no error in PromQL, only an empty answer: the names are checked against the exposition
    const exposition = (await call(`${router.adminUrl}/metrics`)).text;
    const families = new Set([...exposition.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]));
    const named = new Set(dashboard.flatMap((s) => s.expr.match(/\bllm_router_\w+/g) ?? []));
    assert.ok(named.size >= 15, [...named].join(', '));
    for (const name of named)
      assert.ok(families.has(name) || families.has(name.replace(/_(bucket|sum|count)$/, '')), `${name} is exported`);
    // and the panels show something for a model that is served: its state and its ready endpoint
    const ready = dashboard.find((s) => s.expr.includes('llm_router_model_ready_endpoints'))!;
    await until('the ready endpoint in Prometheus', async () => (await value(asGrafanaSends(ready.expr, 'served'))) === 1, 15_000, 200);
    const state = dashboard.find((s) => s.expr.includes('llm_router_model_state{'))!;
    assert.equal(await value(asGrafanaSends(state.expr, 'served')), 3, 'ready is 3 in the state timeline');
    assert.equal(await value(asGrafanaSends(state.expr, 'zero')), 1, 'scaled-to-zero is 1');
  });

  test('one request to a model at zero: the trigger is above 0 within three scrape intervals', async (t) => {
    const trigger = forModel(triggers()[0]!.expr, 'zero');
    const answer = await call(`${router.url}/v1/chat/completions`, { body: chat('zero') });
    assert.equal(answer.status, 503);
    const sent = Date.now();
    // three scrape intervals, plus room for a busy machine's late scrape and evaluation
    await until('the trigger above 0', async () => ((await value(trigger)) ?? 0) > 0, 3 * SCRAPE_SECONDS * 1000 + 5_000, 100);
    const took = Date.now() - sent;
    t.diagnostic(`trigger above 0 ${took} ms after the first request (scrape interval ${SCRAPE_SECONDS * 1000} ms)`);
    assert.ok(
      ((await value(`increase(llm_router_model_demand_total{model="zero"}[1m])`)) ?? 0) > 0,
      'increase() counts the very first request',
    );
  });

  test('a held request keeps the trigger above 0; 429, 404, a stream and a 200: promtool finds nothing in the exposition', async () => {
    const held = call(`${router.url}/v1/chat/completions`, { body: chat('held'), timeoutMs: 60_000 });
    await until('held', async () =>
      /^llm_router_model_requests_held\{model="held"\} 1$/m.test((await call(`${router.adminUrl}/metrics`)).text),
    );
    const full = await call(`${router.url}/v1/chat/completions`, { body: chat('held') });
    assert.equal(full.status, 429);
    const trigger = forModel(triggers()[0]!.expr, 'held');
    await until(
      'held term in Prometheus',
      async () => (await value('sum(llm_router_model_requests_held{model="held"})')) === 1,
      15_000,
      100,
    );
    assert.ok(((await value(trigger)) ?? 0) >= 1);

    assert.equal((await call(`${router.url}/v1/chat/completions`, { body: chat('no-such-model') })).status, 404);
    assert.equal((await call(`${router.url}/v1/chat/completions`, { body: chat('served') })).status, 200);
    const stream = await call(`${router.url}/v1/chat/completions`, { body: chat('served', { stream: true }) });
    assert.equal(stream.status, 200);
    assert.match(stream.text, /data: \[DONE\]/);

    const exposition = (await call(`${router.adminUrl}/metrics`)).text;
    for (const status of ['200', '404', '429', '503'])
      assert.match(exposition, new RegExp(`^llm_router_requests_total\\{[^}]*status="${status}"`, 'm'));
    assert.match(exposition, /^llm_router_config_info\{sha256="[0-9a-f]{64}"\} 1$/m);
    const check = await promtoolCheckMetrics(exposition);
    assert.deepEqual(check, { code: 0, output: '' }, 'promtool check metrics: no findings');
    await router.stop();
    await held.catch(() => undefined);
  });

  test('the alert rules the docs give load in promtool', async () => {
    const alerts = sources.filter((s) => s.alert);
    assert.ok(alerts.length >= 1);
    const rules = [
      'groups:',
      '  - name: llm-router',
      '    rules:',
      ...alerts.flatMap((a) => [`      - alert: ${a.alert}`, `        expr: ${JSON.stringify(a.expr)}`]),
      '',
    ].join('\n');
    assert.deepEqual(await promtoolCheckRules(rules), { code: 0, output: '' });
  });
});
