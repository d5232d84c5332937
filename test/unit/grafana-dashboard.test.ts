// deploy/grafana/llm-router.json as Grafana reads it on import: unique panel ids, panels on the 24-column grid without
// overlapping, every query on the chosen Prometheus data source, the variables its queries use defined.
// (Its PromQL is evaluated on a real Prometheus in test/integration/prometheus.test.ts.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

interface Panel {
  id: number;
  type: string;
  title: string;
  gridPos: { x: number; y: number; w: number; h: number };
  datasource?: { type: string; uid: string };
  targets?: { refId: string; expr: string; datasource: { type: string; uid: string } }[];
}

test('the Grafana dashboard is well formed for an import', () => {
  const dashboard = JSON.parse(readFileSync(path.join(ROOT, 'deploy', 'grafana', 'llm-router.json'), 'utf8'));
  assert.equal(dashboard.uid, 'llm-router');
  const panels = dashboard.panels as Panel[];
  assert.equal(new Set(panels.map((p) => p.id)).size, panels.length, 'unique ids');
  const cells = new Set<string>();
  for (const p of panels) {
    const { x, y, w, h } = p.gridPos;
    assert.ok(x >= 0 && w > 0 && x + w <= 24 && h > 0, `${p.title} on the grid`);
    for (let i = x; i < x + w; i++)
      for (let j = y; j < y + h; j++) {
        assert.ok(!cells.has(`${i},${j}`), `${p.title} overlaps another panel at ${i},${j}`);
        cells.add(`${i},${j}`);
      }
    if (p.type === 'row') continue;
    // biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's variable syntax, not a template literal
    assert.deepEqual(p.datasource, { type: 'prometheus', uid: '${datasource}' }, p.title);
    assert.ok(p.targets && p.targets.length > 0, `${p.title} has queries`);
    assert.equal(new Set(p.targets.map((t) => t.refId)).size, p.targets.length, `${p.title}: unique refIds`);
    for (const t of p.targets) assert.deepEqual(t.datasource, p.datasource, `${p.title} ${t.refId}`);
  }
  const variables = (dashboard.templating.list as { name: string; type: string }[]).map((v) => `${v.name}:${v.type}`);
  assert.deepEqual(variables, ['datasource:datasource', 'model:query']);
  const used = new Set(panels.flatMap((p) => (p.targets ?? []).flatMap((t) => t.expr.match(/\$\w+/g) ?? [])));
  assert.deepEqual([...used].sort(), ['$__rate_interval', '$model']);
});

test('the KV-cache-aware routing row charts every KV metric; the router row its engine connections and dashboard clients', () => {
  const dashboard = JSON.parse(readFileSync(path.join(ROOT, 'deploy', 'grafana', 'llm-router.json'), 'utf8'));
  const panels = dashboard.panels as Panel[];
  /** the metric names the panels of a row query (a row's panels follow it until the next row) */
  const rowMetrics = (title: string): Set<string> => {
    const start = panels.findIndex((p) => p.type === 'row' && p.title === title);
    assert.ok(start >= 0, `a row "${title}"`);
    const end = panels.findIndex((p, i) => i > start && p.type === 'row');
    const exprs = panels.slice(start + 1, end < 0 ? undefined : end).flatMap((p) => (p.targets ?? []).map((t) => t.expr));
    return new Set(exprs.flatMap((e) => (e.match(/\bllm_router_\w+/g) ?? []).map((m) => m.replace(/_(bucket|sum|count)$/, ''))));
  };
  const kv = rowMetrics('KV-cache-aware routing');
  for (const name of [
    'llm_router_kv_events_total',
    'llm_router_kv_event_gaps_total',
    'llm_router_kv_event_replays_total',
    'llm_router_kv_event_rebuilds_total',
    'llm_router_kv_events_malformed_total',
    'llm_router_kv_index_blocks',
    'llm_router_kv_event_endpoints',
    'llm_router_kvaware_matched_ratio',
    'llm_router_kvaware_fallback_total',
    'llm_router_kvaware_tokenize_seconds',
    'llm_router_kvaware_tokenizer_restarts_total',
  ])
    assert.ok(kv.has(name), `${name} in the KV row`);
  const router = rowMetrics('Router processes and connections');
  for (const name of [
    'llm_router_engine_connections_open',
    'llm_router_engine_connections_busy',
    'llm_router_engine_requests_queued',
    'llm_router_dashboard_clients',
  ])
    assert.ok(router.has(name), `${name} in the router row`);
});
