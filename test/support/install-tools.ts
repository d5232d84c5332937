// `npm run test:tools`: prints the one command that installs the tools some suites need on Debian/Ubuntu (Go and the
// chart renderer's packaged sources, Prometheus/promtool, Chromium, kubectl, buildah, debootstrap); `npm run test:tools -- --install` runs it.
import { spawnSync } from 'node:child_process';
import { hasTool, installAllCommand, type Tool } from './tools.js';

const tools: Tool[] = ['go', 'prometheus', 'promtool', 'chromium', 'kubectl', 'buildah', 'debootstrap'];
const command = installAllCommand();
console.log(`installed: ${tools.map((t) => `${t} ${hasTool(t) ? 'yes' : 'no'}`).join(', ')}`);
if (process.argv.includes('--install')) {
  console.log(`running (as root): ${command}`);
  process.exit(spawnSync('sh', ['-ec', command], { stdio: 'inherit' }).status ?? 1);
} else {
  console.log(`to install them all (as root, Debian/Ubuntu):\n${command}`);
}
