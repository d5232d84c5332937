// The image's Debian base: debootstrap's minbase of bookworm from Debian's mirror, brought up to date from
// bookworm-updates and bookworm-security, then cut down to what Node.js needs at run time (the C and C++ runtime
// libraries, /bin/sh, base-files) with no apt, dpkg, docs, man pages, locales or iconv modules. The result is a tar
// kept in the cache directory under a key of what it is made from, and made again once it is older than maxAgeDays
// (so that security updates reach the image).
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  chownSync,
  copyFileSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import { run, step } from './run.js';

/** the uid and gid the image runs as (distroless's "nonroot"; the chart's runAsUser) */
export const IMAGE_UID = 65532;

export interface BaseSpec {
  readonly suite: string;
  readonly mirror: string;
  readonly securityMirror: string;
}

/** the Debian packages whose files the image keeps: what `node` and the native add-ons link against, and /bin/sh */
export const KEEP_PACKAGES: readonly string[] = ['base-files', 'libc6', 'libgcc-s1', 'gcc-12-base', 'libstdc++6', 'dash'];

/** files of kept packages that Node.js never reads (each package's copyright file stays) */
const DROP = [
  /^\/usr\/share\/doc\/[^/]+\/(?!copyright$)/,
  /^\/usr\/share\/(man|info|lintian|locale|menu|debianutils|bug)(\/|$)/,
  /^\/usr\/lib\/x86_64-linux-gnu\/gconv(\/|$)/,
  /^\/etc\/(update-motd\.d|skel|profile\.d)(\/|$)/,
];

/** bump when the way the base is made changes: a new key, so the cached tar is made again */
const FORMAT = 3;

const ETC: Readonly<Record<string, string>> = {
  passwd: `root:x:0:0:root:/root:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\nnonroot:x:${IMAGE_UID}:${IMAGE_UID}:nonroot:/home/nonroot:/usr/sbin/nologin\n`,
  group: `root:x:0:\nnogroup:x:65534:\nnonroot:x:${IMAGE_UID}:\n`,
  'nsswitch.conf': 'passwd: files\ngroup: files\nhosts: files dns\n',
  'ld.so.conf': 'include /etc/ld.so.conf.d/*.conf\n',
  // mount points: a runtime (Kubernetes, buildah run, docker) binds its own over these, also on a read-only root
  hosts: '',
  hostname: '',
  'resolv.conf': '',
};

export interface Base {
  readonly tar: string;
  readonly packages: Readonly<Record<string, string>>;
  readonly built: string;
  readonly cached: boolean;
}

/** The cache key: everything the base is made from (a changed package list, mirror or recipe makes a new one). */
export function baseKey(spec: BaseSpec): string {
  const recipe = JSON.stringify({ FORMAT, spec, KEEP_PACKAGES, DROP: DROP.map(String), ETC, uid: IMAGE_UID });
  return createHash('sha256').update(recipe).digest('hex').slice(0, 16);
}

/** The base as a tar, from the cache when one made from the same spec is younger than maxAgeDays; else made now. */
export async function debianBase(cacheDir: string, spec: BaseSpec, maxAgeDays: number): Promise<Base> {
  const key = baseKey(spec);
  const tar = path.join(cacheDir, `base-${key}.tar`);
  const manifest = `${tar}.json`;
  if (existsSync(tar) && existsSync(manifest)) {
    const m = JSON.parse(readFileSync(manifest, 'utf8')) as { packages: Record<string, string>; built: string };
    const ageDays = (Date.now() - Date.parse(m.built)) / 86_400_000;
    if (ageDays <= maxAgeDays) return { tar, packages: m.packages, built: m.built, cached: true };
    process.stderr.write(`image: the cached base is ${ageDays.toFixed(1)} days old (over ${maxAgeDays}): making it again\n`);
  }
  mkdirSync(cacheDir, { recursive: true });
  const work = mkdtempSync(path.join(cacheDir, 'base-work-'));
  try {
    const full = path.join(work, 'debootstrap');
    const out = path.join(work, 'rootfs');
    await step(`debootstrap --variant=minbase ${spec.suite} (${spec.mirror})`, () => debootstrap(cacheDir, full, spec));
    await step(`apt-get upgrade from ${spec.suite}-updates and ${spec.suite}-security`, () => upgrade(full, spec));
    const packages = installedVersions(full);
    await step('keep only what Node.js needs at run time', async () => strip(full, out));
    await step('tar the base', () => run('tar', ['--numeric-owner', '-C', out, '-cf', `${tar}.part`, '.'], { timeoutMs: 300_000 }));
    renameSync(`${tar}.part`, tar);
    const built = new Date().toISOString();
    writeFileSync(manifest, `${JSON.stringify({ key, spec, built, packages }, null, 2)}\n`);
    return { tar, packages, built, cached: false };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

async function debootstrap(cacheDir: string, target: string, spec: BaseSpec): Promise<void> {
  // the downloaded .debs stay in the cache too: making the base again (a new week) downloads only what changed
  const debs = path.join(cacheDir, 'debs');
  mkdirSync(debs, { recursive: true });
  await run('debootstrap', ['--variant=minbase', `--cache-dir=${debs}`, spec.suite, target, spec.mirror], { timeoutMs: 1_200_000 });
}

async function upgrade(root: string, spec: BaseSpec): Promise<void> {
  writeFileSync(
    path.join(root, 'etc/apt/sources.list'),
    [
      `deb ${spec.mirror} ${spec.suite} main`,
      `deb ${spec.mirror} ${spec.suite}-updates main`,
      `deb ${spec.securityMirror} ${spec.suite}-security main`,
      '',
    ].join('\n'),
  );
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive', LC_ALL: 'C' };
  await run('chroot', [root, 'apt-get', '-qq', 'update'], { env, timeoutMs: 600_000 });
  await run('chroot', [root, 'apt-get', '-qq', '-y', 'upgrade'], { env, timeoutMs: 900_000 });
}

/** dpkg's status file as stanzas by package name */
function dpkgStatus(root: string): Map<string, string> {
  const stanzas = new Map<string, string>();
  for (const stanza of readFileSync(path.join(root, 'var/lib/dpkg/status'), 'utf8').split(/\n\n+/)) {
    const name = /^Package: (\S+)$/m.exec(stanza)?.[1];
    if (name) stanzas.set(name, stanza.trim());
  }
  return stanzas;
}

function installedVersions(root: string): Record<string, string> {
  const status = dpkgStatus(root);
  const versions: Record<string, string> = {};
  for (const name of KEEP_PACKAGES) {
    const stanza = status.get(name);
    const version = stanza && /^Status: install ok installed$/m.test(stanza) ? /^Version: (\S+)$/m.exec(stanza)?.[1] : undefined;
    if (!version) throw new Error(`debootstrap's ${KEEP_PACKAGES.join(', ')}: ${name} is not installed`);
    versions[name] = version;
  }
  return versions;
}

/** the files a package installed, from dpkg's list (the package name may carry the architecture) */
function packageFiles(root: string, name: string): string[] {
  const info = path.join(root, 'var/lib/dpkg/info');
  const list = readdirSync(info).find((f) => f === `${name}.list` || (f.startsWith(`${name}:`) && f.endsWith('.list')));
  if (!list) throw new Error(`no dpkg file list for ${name}`);
  return readFileSync(path.join(info, list), 'utf8').split('\n').filter(Boolean);
}

/** Copies one path of `from` to `to`: a directory (made, not filled), a symbolic link or a file, with its mode. */
function copyEntry(from: string, to: string, p: string): void {
  const src = path.join(from, p);
  const dst = path.join(to, p);
  let st: ReturnType<typeof lstatSync>;
  try {
    st = lstatSync(src);
  } catch {
    return; // listed but gone (a diverted or replaced file)
  }
  if (st.isSymbolicLink()) {
    if (!existsSync(dst) && !isLink(dst)) symlinkSync(readlinkSync(src), dst);
  } else if (st.isDirectory()) {
    if (!existsSync(dst)) {
      mkdirSync(dst, { recursive: true });
      chmodSync(dst, st.mode & 0o7777);
    }
  } else if (st.isFile()) {
    mkdirSync(path.dirname(dst), { recursive: true });
    copyFileSync(src, dst);
    chmodSync(dst, st.mode & 0o7777);
  }
}

function isLink(p: string): boolean {
  try {
    return lstatSync(p).isSymbolicLink();
  } catch {
    return false;
  }
}

/** Builds `out` from the kept packages' files of `root`, plus the few files an image needs of its own. */
function strip(root: string, out: string): void {
  mkdirSync(out);
  chmodSync(out, 0o755);
  // the merged-/usr links first (/bin -> usr/bin, ...), so that a package's /bin/sh lands in /usr/bin as on Debian
  for (const top of readdirSync(root)) {
    const p = path.join(root, top);
    if (!isLink(p)) continue;
    const target = readlinkSync(p);
    if (existsSync(path.join(root, target))) mkdirSync(path.join(out, target), { recursive: true });
    symlinkSync(target, path.join(out, top));
  }
  for (const name of KEEP_PACKAGES) {
    for (const p of packageFiles(root, name)) {
      if (p === '/.' || DROP.some((re) => re.test(p))) continue;
      copyEntry(root, out, p);
    }
  }
  // only the kept packages in dpkg's status, so that scanners (trivy, grype) see what the image holds
  const status = dpkgStatus(root);
  mkdirSync(path.join(out, 'var/lib/dpkg'), { recursive: true });
  writeFileSync(path.join(out, 'var/lib/dpkg/status'), `${KEEP_PACKAGES.map((n) => status.get(n)).join('\n\n')}\n`);
  for (const [name, text] of Object.entries(ETC)) writeFileSync(path.join(out, 'etc', name), text, { mode: 0o644 });
  for (const dir of ['tmp', 'var/tmp']) {
    mkdirSync(path.join(out, dir), { recursive: true });
    chmodSync(path.join(out, dir), 0o1777);
  }
  const home = path.join(out, 'home/nonroot');
  mkdirSync(home, { recursive: true });
  chownSync(home, IMAGE_UID, IMAGE_UID);
  chmodSync(home, 0o755);
  // the dynamic loader's cache of the kept libraries (the host's ldconfig, run on the new root)
  const ldconfig = ['/usr/sbin/ldconfig', '/sbin/ldconfig'].find((f) => existsSync(f));
  if (!ldconfig || spawnSync(ldconfig, ['-r', out], { stdio: 'ignore' }).status !== 0)
    process.stderr.write('image: no ldconfig -r: the loader searches its default directories\n');
  if (!statSync(path.join(out, 'usr/bin/dash')).isFile()) throw new Error('the stripped base has no /usr/bin/dash');
}
