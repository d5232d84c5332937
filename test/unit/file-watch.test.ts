// FileWatch sees a file rewritten in place, a new file renamed over it, and a Kubernetes ConfigMap update (the
// directory's ..data symlink swapped to a new timestamped directory) from the file system's events alone: the re-read
// interval is an hour here. With events missed, the interval still reads the file.
import { test } from 'node:test';
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { FileWatch } from '../../src/router/util/file-watch.js';
import { until } from '../support/within.js';

function watching(file: string, intervalMs = 3_600_000): { texts: string[]; errors: string[]; watch: FileWatch } {
  const texts: string[] = [];
  const errors: string[] = [];
  const watch = new FileWatch({
    path: file,
    intervalMs,
    settleMs: 20,
    onText: (t) => texts.push(t),
    onError: (e) => errors.push(e.message),
  });
  watch.start();
  return { texts, errors, watch };
}

test('a file rewritten in place, then replaced by a rename, is read after each', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'file-watch-'));
  const file = path.join(dir, 'router.yaml');
  writeFileSync(file, 'one\n');
  const w = watching(file);
  try {
    writeFileSync(file, 'two\n');
    await until('the in-place write is read', () => w.texts.at(-1) === 'two\n', 5_000);
    writeFileSync(`${file}.tmp`, 'three\n');
    renameSync(`${file}.tmp`, file);
    await until('the renamed file is read', () => w.texts.at(-1) === 'three\n', 5_000);
    // the watch follows the new file
    writeFileSync(file, 'four\n');
    await until('the new file is watched too', () => w.texts.at(-1) === 'four\n', 5_000);
  } finally {
    w.watch.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a ConfigMap update (the ..data symlink swapped) is read', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'file-watch-cm-'));
  const version = (name: string, text: string): void => {
    mkdirSync(path.join(dir, name));
    writeFileSync(path.join(dir, name, 'config.yaml'), text);
  };
  // as the kubelet lays out a ConfigMap volume: config.yaml -> ..data/config.yaml, ..data -> ..<timestamp>
  version('..2026_01_01_00_00_00.1', 'v1\n');
  symlinkSync('..2026_01_01_00_00_00.1', path.join(dir, '..data'));
  symlinkSync('..data/config.yaml', path.join(dir, 'config.yaml'));
  const w = watching(path.join(dir, 'config.yaml'));
  try {
    version('..2026_01_01_00_01_00.2', 'v2\n');
    symlinkSync('..2026_01_01_00_01_00.2', path.join(dir, '..data_tmp'));
    renameSync(path.join(dir, '..data_tmp'), path.join(dir, '..data'));
    rmSync(path.join(dir, '..2026_01_01_00_00_00.1'), { recursive: true });
    await until('the new version is read', () => w.texts.at(-1) === 'v2\n', 5_000);
  } finally {
    w.watch.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the interval reads the file whatever the events; a file that is gone is an error, and its return is read', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'file-watch-int-'));
  const file = path.join(dir, 'router.yaml');
  writeFileSync(file, 'a\n');
  const w = watching(file, 50);
  try {
    await until('read on the interval', () => w.texts.length >= 2, 5_000);
    rmSync(file);
    await until('the missing file is an error', () => w.errors.some((e) => /ENOENT/.test(e)), 5_000);
    writeFileSync(file, 'b\n');
    await until('the file back is read', () => w.texts.at(-1) === 'b\n', 5_000);
  } finally {
    w.watch.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
