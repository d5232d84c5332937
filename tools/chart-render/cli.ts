// Renders the Helm chart without helm, and keeps deploy/manifests/ in step with it.
//   npm run --silent chart:render -- [CHART] [-f VALUES]... [--release-name N] [--namespace NS] [--show-only templates/X.yaml]...
//   npm run chart:manifests          (write deploy/manifests/)
//   node --import tsx tools/chart-render/cli.ts check-manifests   (exit 1 when they are stale)
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { chartRenderBinary, ChartRenderBuildError } from './build.js';
import { plainManifests } from './plain.js';
import { CHART_DIR, ChartError } from './render.js';

/** chart-render's flags that take a value (the Go flag package accepts one dash or two) */
const VALUE_FLAGS = new Set(['f', 'values', 'release-name', 'namespace', 'show-only', 'kube-version', 'api-versions']);

const USAGE = `usage: cli.ts render [CHART] [chart-render flags]   (default chart: deploy/helm/llm-router; --help lists the flags)
       cli.ts write-manifests | check-manifests`;

function main(argv: string[]): number {
  const [command, ...rest] = argv;
  switch (command) {
    case 'render': {
      // without a chart argument (one that is neither a flag nor a flag's value), the project's chart
      const takesValue = (a: string | undefined): boolean => a !== undefined && VALUE_FLAGS.has(a.replace(/^--?/, ''));
      const hasChart = rest.some((a, i) => !a.startsWith('-') && !takesValue(rest[i - 1]));
      const result = spawnSync(chartRenderBinary(), hasChart ? rest : [CHART_DIR, ...rest], { stdio: 'inherit' });
      if (result.error) throw result.error;
      return result.status ?? 1;
    }
    case 'write-manifests':
      for (const m of plainManifests()) {
        writeFileSync(m.file, m.content);
        process.stdout.write(`wrote ${m.path}\n`);
      }
      return 0;
    case 'check-manifests': {
      let stale = 0;
      for (const m of plainManifests()) {
        let current = '';
        try {
          current = readFileSync(m.file, 'utf8');
        } catch {
          current = '';
        }
        if (current !== m.content) {
          stale++;
          process.stderr.write(`${m.path} is not what the chart renders; run: npm run chart:manifests\n`);
        }
      }
      return stale > 0 ? 1 : 0;
    }
    default:
      process.stderr.write(`${USAGE}\n`);
      return command === undefined || command === '--help' ? 0 : 2;
  }
}

try {
  process.exitCode = main(process.argv.slice(2));
} catch (err) {
  if (!(err instanceof ChartError || err instanceof ChartRenderBuildError)) throw err;
  process.stderr.write(`chart-render: ${err.message}\n`);
  process.exitCode = 1;
}
