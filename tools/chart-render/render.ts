// Renders a Helm chart as `helm template` does, through the Go renderer in this folder (Helm's own libraries:
// text/template, Sprig, go-yaml), for tests and for the plain manifests. Runs synchronously: a render takes
// milliseconds, and tests compute their fixtures with it.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chartRenderBinary, ROOT } from './build.js';

export const CHART_DIR = path.join(ROOT, 'deploy', 'helm', 'llm-router');
const RENDER_TIMEOUT_MS = 30_000;

export interface RenderOptions {
  /** value overrides, lowest precedence first, like repeated `helm template -f`: a path, or an object */
  readonly values?: readonly (string | Record<string, unknown>)[];
  readonly releaseName?: string;
  readonly namespace?: string;
  /** only these templates (paths relative to the chart, e.g. templates/rbac.yaml), as `--show-only` */
  readonly showOnly?: readonly string[];
  /** API versions that .Capabilities.APIVersions.Has reports beyond the built-in ones */
  readonly apiVersions?: readonly string[];
  readonly kubeVersion?: string;
}

export interface RenderedDocument {
  /** e.g. llm-router/templates/router.yaml */
  readonly source: string;
  readonly kind: string;
  readonly name: string;
  readonly text: string;
}

export interface RenderedChart {
  readonly documents: readonly RenderedDocument[];
  /** the whole output, as `helm template` prints it */
  readonly manifest: string;
}

/** The chart does not render: Helm's message, e.g. `execution error at (llm-router/templates/x.yaml:3:9): ...`. */
export class ChartError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ChartError';
  }
}

export function renderChart(chartDir: string, opts: RenderOptions = {}): RenderedChart {
  const scratch = mkdtempSync(path.join(os.tmpdir(), 'chart-values-'));
  try {
    const args = [chartDir, '--json', '--release-name', opts.releaseName ?? 'llm-router', '--namespace', opts.namespace ?? 'default'];
    (opts.values ?? []).forEach((v, i) => {
      if (typeof v === 'string') {
        args.push('-f', v);
        return;
      }
      // JSON is YAML: an object override becomes a values file of its own, in its place in the order
      const file = path.join(scratch, `values-${i}.json`);
      writeFileSync(file, JSON.stringify(v));
      args.push('-f', file);
    });
    for (const s of opts.showOnly ?? []) args.push('--show-only', s);
    for (const a of opts.apiVersions ?? []) args.push('--api-versions', a);
    if (opts.kubeVersion) args.push('--kube-version', opts.kubeVersion);
    return JSON.parse(runRenderer(args)) as RenderedChart;
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

/** Runs the renderer with `args` and returns what it printed; a chart error becomes a ChartError. */
export function runRenderer(args: readonly string[]): string {
  try {
    return execFileSync(chartRenderBinary(), args, {
      encoding: 'utf8',
      timeout: RENDER_TIMEOUT_MS,
      maxBuffer: 64 * 1024 * 1024,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  } catch (err) {
    const e = err as { status?: number | null; stderr?: string };
    if (e.status === 1 || e.status === 2) throw new ChartError((e.stderr ?? '').trim().replace(/^Error: /, ''));
    throw err;
  }
}
