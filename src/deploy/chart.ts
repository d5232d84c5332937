// Renders a Helm chart the way `helm template` does, without helm: values.yaml merged with override files
// (maps merge, a null removes a key), every templates/ file rendered with the built-in objects, empty documents
// dropped, documents sorted in Helm's install order, each headed by `# Source:`.
import { readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { parseAllDocuments, parse as parseYaml } from 'yaml';
import { helmFunctions } from './functions.js';
import { TemplateError, Templates } from './gotemplate.js';

export interface RenderOptions {
  /** value overrides, lowest precedence first (like repeated `helm template -f`) */
  readonly values?: readonly Record<string, unknown>[];
  readonly releaseName?: string;
  readonly namespace?: string;
  /** only these templates (paths relative to the chart, e.g. templates/rbac.yaml), as `--show-only` */
  readonly showOnly?: readonly string[];
  /** API versions that .Capabilities.APIVersions.Has reports */
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
  readonly values: Record<string, unknown>;
}

/** Helm's install order (releaseutil.InstallOrder); other kinds come after these. */
const INSTALL_ORDER = [
  'PriorityClass', 'Namespace', 'NetworkPolicy', 'ResourceQuota', 'LimitRange', 'PodSecurityPolicy', 'PodDisruptionBudget',
  'ServiceAccount', 'Secret', 'SecretList', 'ConfigMap', 'StorageClass', 'PersistentVolume', 'PersistentVolumeClaim',
  'CustomResourceDefinition', 'ClusterRole', 'ClusterRoleList', 'ClusterRoleBinding', 'ClusterRoleBindingList', 'Role',
  'RoleList', 'RoleBinding', 'RoleBindingList', 'Service', 'DaemonSet', 'Pod', 'ReplicationController', 'ReplicaSet',
  'Deployment', 'HorizontalPodAutoscaler', 'StatefulSet', 'Job', 'CronJob', 'IngressClass', 'Ingress', 'APIService',
  'MutatingWebhookConfiguration', 'ValidatingWebhookConfiguration',
];

const DEFAULT_API_VERSIONS = ['v1', 'apps/v1', 'batch/v1', 'policy/v1', 'rbac.authorization.k8s.io/v1', 'autoscaling/v2', 'networking.k8s.io/v1'];

export class ChartError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ChartError';
  }
}

function isMap(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Helm's value coalescing: maps merge key by key, anything else replaces, null deletes. */
export function mergeValues(base: Record<string, unknown>, override: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(override)) {
    if (v === null) delete out[k];
    else if (isMap(v) && isMap(out[k])) out[k] = mergeValues(out[k] as Record<string, unknown>, v);
    else out[k] = v;
  }
  return out;
}

export function readValuesFile(file: string): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = parseYaml(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new ChartError(`${file}: ${(err as Error).message}`);
  }
  if (parsed === null || parsed === undefined) return {};
  if (!isMap(parsed)) throw new ChartError(`${file}: values must be a YAML mapping`);
  return parsed;
}

function listFiles(dir: string, prefix = ''): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) out.push(...listFiles(full, `${prefix}${name}/`));
    else out.push(`${prefix}${name}`);
  }
  return out;
}

/** Chart.yaml keys as Helm exposes them on .Chart (Name, Version, AppVersion, ...). */
function chartObject(meta: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(meta).map(([k, v]) => [k.charAt(0).toUpperCase() + k.slice(1), v]));
}

function splitDocuments(text: string): string[] {
  return text.split(/(?:^|\n)---[ \t]*(?:\n|$)/).filter((d) => d.split('\n').some((l) => l.trim() !== '' && !l.trim().startsWith('#')));
}

export function renderChart(chartDir: string, opts: RenderOptions = {}): RenderedChart {
  const meta = readValuesFile(path.join(chartDir, 'Chart.yaml'));
  const chartName = String(meta.name ?? path.basename(chartDir));
  let values = readValuesFile(path.join(chartDir, 'values.yaml'));
  for (const override of opts.values ?? []) values = mergeValues(values, override);

  const templateDir = path.join(chartDir, 'templates');
  const files = listFiles(templateDir).filter((f) => /\.(ya?ml|tpl|txt)$/.test(f));
  const templates: Templates = new Templates(helmFunctions({ templates: () => templates }));
  for (const f of files) templates.add(`${chartName}/templates/${f}`, readFileSync(path.join(templateDir, f), 'utf8'));

  const apiVersions = new Set(opts.apiVersions ?? DEFAULT_API_VERSIONS);
  const kubeVersion = opts.kubeVersion ?? 'v1.32.0';
  const [major, minor] = kubeVersion.replace(/^v/, '').split('.');
  const base = {
    Values: values,
    Release: { Name: opts.releaseName ?? 'llm-router', Namespace: opts.namespace ?? 'default', Service: 'Helm', IsInstall: true, IsUpgrade: false, Revision: 1 },
    Chart: chartObject(meta),
    Capabilities: {
      KubeVersion: { Version: kubeVersion, Major: major, Minor: minor },
      APIVersions: { Has: (v: unknown) => apiVersions.has(String(v)) },
    },
  };

  const rendered: (RenderedDocument & { order: number })[] = [];
  let order = 0;
  for (const f of files) {
    // files starting with _ hold only defines; NOTES.txt is printed after install, not applied
    if (path.basename(f).startsWith('_') || !/\.ya?ml$/.test(f)) continue;
    const relative = `templates/${f}`;
    if (opts.showOnly && !opts.showOnly.includes(relative)) continue;
    const source = `${chartName}/${relative}`;
    let text: string;
    try {
      text = templates.execute(source, { ...base, Template: { Name: source, BasePath: `${chartName}/templates` } });
    } catch (err) {
      if (err instanceof TemplateError) throw new ChartError(`${source}: ${err.message}`);
      throw err;
    }
    for (const doc of splitDocuments(text)) {
      const parsed = parseAllDocuments(doc);
      const first = Array.isArray(parsed) ? parsed[0] : undefined;
      const error = first?.errors[0];
      if (!first || error) throw new ChartError(`${source}: rendered YAML does not parse: ${error?.message ?? 'empty'}\n${doc}`);
      const obj = first.toJS() as { kind?: unknown; metadata?: { name?: unknown } } | null;
      if (!isMap(obj)) continue;
      rendered.push({ source, kind: String(obj.kind ?? ''), name: String(obj.metadata?.name ?? ''), text: doc.replace(/^\n+/, '').replace(/\s+$/, ''), order: order++ });
    }
  }
  const rank = (kind: string): number => {
    const i = INSTALL_ORDER.indexOf(kind);
    return i < 0 ? INSTALL_ORDER.length : i;
  };
  rendered.sort((a, b) => rank(a.kind) - rank(b.kind) || a.order - b.order);
  const documents = rendered.map(({ order: _order, ...d }) => d);
  const manifest = documents.map((d) => `---\n# Source: ${d.source}\n${d.text}\n`).join('');
  return { documents, manifest, values };
}
