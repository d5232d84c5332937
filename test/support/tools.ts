// The external tools some suites need (Go for tools/chart-render, Prometheus/promtool, Chromium, kubectl, buildah and
// debootstrap for the image). On a
// machine with Node.js and npm only, a suite that needs one is skipped with one line naming the tool and the command
// that installs it; with TEST_TOOLS=required (`.ci/run` sets it) a missing tool is a failure instead, so CI
// never skips. `npm run test:tools` prints the command that installs them all on Debian/Ubuntu.
import { accessSync, constants, existsSync } from 'node:fs';
import path from 'node:path';
import type { TestContext } from 'node:test';

export type Tool = 'go' | 'prometheus' | 'promtool' | 'chromium' | 'kubectl' | 'openssl' | 'buildah' | 'debootstrap';

const PROMETHEUS = 'apt-get install -y prometheus';
/** the one command per tool (Debian/Ubuntu; Debian's kubectl is in kubernetes-client) */
export const INSTALL: Readonly<Record<Tool, string>> = {
  go: 'apt-get install -y golang-go golang-github-masterminds-sprig-dev golang-gopkg-yaml.v2-dev',
  prometheus: PROMETHEUS,
  promtool: PROMETHEUS,
  chromium: 'apt-get install -y chromium',
  kubectl: 'apt-get install -y kubernetes-client',
  openssl: 'apt-get install -y openssl',
  // the image (tools/image): built and run without a daemon
  buildah: 'apt-get install -y buildah',
  debootstrap: 'apt-get install -y debootstrap',
};

/** the Go sources tools/chart-render builds against (Debian's packaged GOPATH) */
const GOPATH = process.env.CHART_RENDER_GOPATH ?? '/usr/share/gocode';
const GO_SOURCES = ['github.com/Masterminds/sprig', 'gopkg.in/yaml.v2'];

/** The executable `name` on PATH (as a shell finds it), or undefined. */
export function onPath(name: string, env: NodeJS.ProcessEnv = process.env): string | undefined {
  for (const dir of (env.PATH ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const file = path.join(dir, name);
    try {
      accessSync(file, constants.X_OK);
      return file;
    } catch {
      // not here
    }
  }
  return undefined;
}

/** Whether `tool` is usable here (for go: the toolchain and the packaged sources the chart renderer needs). */
export function hasTool(tool: Tool): boolean {
  if (!onPath(tool)) return false;
  if (tool === 'go') return GO_SOURCES.every((s) => existsSync(path.join(GOPATH, 'src', s)));
  return true;
}

/** true when a missing tool must fail the suite (CI), not skip it */
export const toolsRequired = (): boolean => process.env.TEST_TOOLS === 'required';

/**
 * The `skip` option of a `describe` or `test` that needs `tools`: false when they are all here; otherwise one line
 * naming the missing tool and how to install it. With TEST_TOOLS=required a missing tool throws instead,
 * which fails the suite.
 */
export function requireTool(...tools: Tool[]): string | false {
  const missing = tools.filter((t) => !hasTool(t));
  if (missing.length === 0) return false;
  const line = missing.map((t) => `${t} is not installed (install: ${INSTALL[t]})`).join('; ');
  if (toolsRequired()) throw new Error(`TEST_TOOLS=required: ${line}`);
  return line;
}

/** The command that installs every tool (`npm run test:tools` prints it, and runs it with --install). */
export function installAllCommand(): string {
  const apt = [...new Set(Object.values(INSTALL).filter((c) => c.startsWith('apt-get install -y ')))]
    .map((c) => c.slice('apt-get install -y '.length))
    .join(' ');
  return `apt-get update && apt-get install -y ${apt}`;
}

/** Runs `fn` as a subtest that needs `tool`: skipped with the install line when it is missing (failed under CI). */
export async function withTool(t: TestContext, tool: Tool, name: string, fn: () => Promise<void>): Promise<void> {
  await t.test(name, { skip: requireTool(tool) }, fn);
}
