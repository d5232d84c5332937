// The plain manifests in deploy/manifests/, for people without Helm: the chart rendered with its defaults.
// Generated, never edited: `node dist/deploy/cli.js write-manifests`; a test fails when they are stale.
import path from 'node:path';
import { renderChart } from './chart.js';

export const CHART_DIR = path.join('deploy', 'helm', 'llm-router');

interface PlainManifest {
  readonly path: string;
  readonly what: string;
  readonly showOnly?: readonly string[];
}

const PLAIN: readonly PlainManifest[] = [
  { path: 'deploy/manifests/llm-router.yaml', what: 'the router with its Service, ConfigMap, PodDisruptionBudget, ServiceAccount and RBAC' },
  {
    path: 'deploy/manifests/rbac.yaml',
    what: 'only the ServiceAccount and the read-only RBAC the router needs for Kubernetes discovery',
    showOnly: ['templates/serviceaccount.yaml', 'templates/rbac.yaml'],
  },
];

/** Every plain manifest file and its expected content, from the chart under `root`. */
export function plainManifests(root: string): { path: string; content: string }[] {
  return PLAIN.map((p) => {
    const { manifest } = renderChart(path.join(root, CHART_DIR), { releaseName: 'llm-router', namespace: 'default', ...(p.showOnly ? { showOnly: p.showOnly } : {}) });
    const header = [
      `# ${p.what}.`,
      '# Generated from deploy/helm/llm-router (default values, release llm-router, namespace default)',
      '# by `node dist/deploy/cli.js write-manifests`: edit the chart, not this file.',
      '',
    ].join('\n');
    return { path: p.path, content: header + manifest };
  });
}
