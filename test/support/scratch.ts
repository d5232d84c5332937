// Temporary directories for tests, removed when the test process exits, whatever the tests' outcome (a test that
// fails before its own clean-up would otherwise leave them behind, run after run).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

const made = new Set<string>();

/** A new directory under the system's temporary directory, named `prefix` and a random tail. */
export function scratchDir(prefix: string): string {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  if (made.size === 0)
    process.once('exit', () => {
      for (const d of made) rmSync(d, { recursive: true, force: true });
    });
  made.add(dir);
  return dir;
}
