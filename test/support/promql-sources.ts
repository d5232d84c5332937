// Every PromQL expression the project gives users: ```promql blocks and alert rules in docs/, KEDA trigger queries in
// deploy/examples/ and in the chart's rendered ScaledObjects, and dashboard targets under deploy/. A test evaluates
// them all on a real Prometheus, so a documented query that does not parse or names a missing series is caught.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { CHART_DIR, renderChart } from '../../tools/chart-render/render.js';

export interface PromqlSource {
  /** file and what in it */
  readonly where: string;
  readonly expr: string;
  /** an alert rule (docs give them as YAML list items) */
  readonly alert?: string;
}

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', '..');

function files(dir: string, ext: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const p = path.join(dir, name);
    if (statSync(p).isDirectory()) out.push(...files(p, ext));
    else if (name.endsWith(ext)) out.push(p);
  }
  return out.sort();
}

/** Walks parsed YAML/JSON for `query` (KEDA prometheus triggers), `expr` (rules, dashboards) and `alert` rules. */
function collect(value: unknown, where: string, out: PromqlSource[], inPrometheusTrigger = false): void {
  if (Array.isArray(value)) {
    for (const v of value) collect(v, where, out, inPrometheusTrigger);
    return;
  }
  if (value === null || typeof value !== 'object') return;
  const o = value as Record<string, unknown>;
  if (typeof o.expr === 'string') out.push({ where, expr: o.expr, ...(typeof o.alert === 'string' ? { alert: o.alert } : {}) });
  const trigger = o.type === 'prometheus';
  if ((inPrometheusTrigger || trigger) && typeof o.query === 'string') out.push({ where, expr: o.query });
  for (const [k, v] of Object.entries(o)) if (k !== 'expr') collect(v, where, out, trigger || (inPrometheusTrigger && k === 'metadata'));
}

function fromMarkdown(file: string, out: PromqlSource[]): void {
  const text = readFileSync(file, 'utf8');
  const rel = path.relative(ROOT, file);
  for (const m of text.matchAll(/```(\w+)\n([\s\S]*?)```/g)) {
    const [, lang, body] = m as unknown as [string, string, string];
    if (lang === 'promql') {
      // one expression per block; `#` starts a comment to the end of the line, as in PromQL
      const expr = body
        .split('\n')
        .map((l) => l.replace(/#.*$/, '').trim())
        .filter(Boolean)
        .join(' ');
      out.push({ where: `${rel} (promql block)`, expr });
    } else if (lang === 'yaml' && /\b(expr|query):/.test(body)) {
      for (const doc of parseAllDocuments(body)) collect(doc.toJS(), `${rel} (yaml block)`, out);
    }
  }
}

export function documentedPromql(): PromqlSource[] {
  const out: PromqlSource[] = [];
  for (const f of [path.join(ROOT, 'README.md'), ...files(path.join(ROOT, 'docs'), '.md')]) fromMarkdown(f, out);
  for (const f of files(path.join(ROOT, 'deploy'), '.yaml').filter((f) => !f.includes(`${path.sep}helm${path.sep}`))) {
    for (const doc of parseAllDocuments(readFileSync(f, 'utf8'))) collect(doc.toJS(), path.relative(ROOT, f), out);
  }
  // the chart's dashboards/ is a link to deploy/grafana/: each file once
  for (const f of files(path.join(ROOT, 'deploy'), '.json').filter((f) => !f.includes(`${path.sep}helm${path.sep}`)))
    collect(JSON.parse(readFileSync(f, 'utf8')), path.relative(ROOT, f), out);
  const chart = renderChart(CHART_DIR, {
    values: [
      {
        keda: { enabled: true, flavour: 'prometheus' },
        engines: [{ name: 'e', model: 'org/m', autoscaling: { enabled: true, minReplicas: 0, maxReplicas: 2 } }],
      },
    ],
  });
  for (const d of chart.documents) for (const doc of parseAllDocuments(d.text)) collect(doc.toJS(), `chart ${d.source}`, out);
  return out;
}

/** The expression about `model`: every model="..." matcher (the docs write M or an example name) names it. */
export function forModel(expr: string, model: string): string {
  return expr.replace(/model="[^"]*"/g, `model=${JSON.stringify(model)}`);
}

/**
 * What Grafana sends Prometheus for a dashboard expression: its variables filled in as Grafana fills them (`$model`
 * with the model chosen, the interval variables with durations), so that Prometheus can evaluate it.
 */
export function asGrafanaSends(expr: string, model: string): string {
  return expr
    .replaceAll('$__rate_interval', '1m')
    .replaceAll('$__interval', '15s')
    .replaceAll('$__range', '1h')
    .replace(/\$\{?model\}?/g, model);
}
