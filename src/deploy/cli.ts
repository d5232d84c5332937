#!/usr/bin/env node
// Renders the Helm chart without helm, and keeps deploy/manifests/ in step with it.
//   node dist/deploy/cli.js render [CHART] [-f VALUES]... [--release-name N] [--namespace NS] [--show-only templates/X.yaml]...
//   node dist/deploy/cli.js write-manifests | check-manifests
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { FlagReader, UsageError, parseFlags, usage, type FlagSpec } from '../cli/flags.js';
import { ChartError, readValuesFile, renderChart } from './chart.js';
import { CHART_DIR, plainManifests } from './plain.js';

const FLAGS: readonly FlagSpec[] = [
  { name: 'values', kind: 'repeat', aliases: ['f'], help: 'values file merged over the chart defaults; repeat for more (later wins)' },
  { name: 'release-name', kind: 'string', default: 'llm-router', help: 'release name (prefix of object names)' },
  { name: 'namespace', kind: 'string', default: 'default', help: 'namespace of the objects' },
  { name: 'show-only', kind: 'repeat', help: 'render only this template, e.g. templates/rbac.yaml; repeatable' },
  { name: 'root', kind: 'string', default: '.', help: 'project root for write-manifests and check-manifests' },
];

const SUMMARY = [
  'render: print the chart rendered as `helm template` would (default chart: deploy/helm/llm-router).',
  'write-manifests: regenerate deploy/manifests/ from the chart; check-manifests: exit 1 when they are stale.',
].join('\n');

export async function runDeployCli(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (!command || command === '--help' || command === '-h' || rest.includes('--help')) {
    process.stdout.write(usage('deploy (render|write-manifests|check-manifests) [CHART]', SUMMARY, FLAGS).replace('llm-router deploy', 'node dist/deploy/cli.js') + '\n');
    return 0;
  }
  const parsed = parseFlags(rest.map((a) => (a === '-f' ? '--values' : a)), FLAGS, { allowPositionals: true });
  const flags = new FlagReader(parsed);
  const root = path.resolve(flags.string('root') ?? '.');
  switch (command) {
    case 'render': {
      const chart = parsed.positionals[0] ?? path.join(root, CHART_DIR);
      const showOnly = flags.list('show-only');
      const { manifest } = renderChart(chart, {
        values: flags.list('values').map(readValuesFile),
        releaseName: flags.string('release-name') ?? 'llm-router',
        namespace: flags.string('namespace') ?? 'default',
        ...(showOnly.length > 0 ? { showOnly } : {}),
      });
      process.stdout.write(manifest);
      return 0;
    }
    case 'write-manifests':
      for (const m of plainManifests(root)) {
        mkdirSync(path.dirname(path.join(root, m.path)), { recursive: true });
        writeFileSync(path.join(root, m.path), m.content);
        process.stdout.write(`wrote ${m.path}\n`);
      }
      return 0;
    case 'check-manifests': {
      let stale = 0;
      for (const m of plainManifests(root)) {
        let current = '';
        try {
          current = readFileSync(path.join(root, m.path), 'utf8');
        } catch {
          current = '';
        }
        if (current !== m.content) {
          stale++;
          process.stderr.write(`${m.path} is not what the chart renders; run: node dist/deploy/cli.js write-manifests\n`);
        }
      }
      return stale > 0 ? 1 : 0;
    }
    default:
      throw new UsageError(`unknown command ${JSON.stringify(command)}; use render, write-manifests or check-manifests`);
  }
}

const isMain = process.argv[1] !== undefined && path.resolve(process.argv[1]).replace(/\.ts$/, '.js') === new URL(import.meta.url).pathname.replace(/\.ts$/, '.js');
if (isMain) {
  runDeployCli(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      if (err instanceof UsageError || err instanceof ChartError) {
        process.stderr.write(`llm-router deploy: ${err.message}\n`);
        process.exitCode = err instanceof UsageError ? 2 : 1;
        return;
      }
      throw err;
    },
  );
}
