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
