// The plain manifests in deploy/manifests/, for people without Helm: the chart rendered with its defaults.
// Generated, never edited: `npm run chart:manifests`; a test fails when they are stale.
import path from 'node:path';
import { ROOT } from './build.js';
import { CHART_DIR, renderChart } from './render.js';

interface PlainManifest {
  readonly path: string;
  readonly what: string;
  readonly showOnly?: readonly string[];
}

const PLAIN: readonly PlainManifest[] = [
  {
    path: 'deploy/manifests/llm-router.yaml',
    what: 'the router with its Service, ConfigMap, PodDisruptionBudget, ServiceAccount and RBAC',
  },
  {
    path: 'deploy/manifests/rbac.yaml',
    what: 'only the ServiceAccount and the read-only RBAC the router needs for Kubernetes discovery',
    showOnly: ['templates/serviceaccount.yaml', 'templates/rbac.yaml'],
  },
];

/** Every plain manifest file (absolute path, path relative to the project) and its expected content. */
export function plainManifests(): { file: string; path: string; content: string }[] {
  return PLAIN.map((p) => {
    const { manifest } = renderChart(CHART_DIR, {
      releaseName: 'llm-router',
      namespace: 'default',
      ...(p.showOnly ? { showOnly: p.showOnly } : {}),
    });
    const header = [
      `# ${p.what}.`,
      '# Generated from deploy/helm/llm-router (default values, release llm-router, namespace default)',
      '# by `npm run chart:manifests` (tools/chart-render): edit the chart, not this file.',
      '',
    ].join('\n');
    return { file: path.join(ROOT, p.path), path: p.path, content: header + manifest };
  });
}
