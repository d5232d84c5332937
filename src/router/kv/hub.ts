// A model's tokenizer files from the Hugging Face Hub (or a mirror, HF_ENDPOINT), into the Hub's standard cache layout
// (HF_HUB_CACHE/models--org--name/{blobs,snapshots,refs}), which the engines' own cache shares: a cache volume filled
// by vLLM or by `huggingface-cli download` is read as it is, and what the router writes there reads the same to them.
// Only the tokenizer's files are fetched (TOKENIZER_FILES), never weights. The Hub's file API is spoken by
// @huggingface/hub (fileDownloadInfo, pathsInfo, downloadFile); the cache files are written here, because its
// downloadFileToCacheDir writes one fixed `.incomplete` name per blob (two processes fetching at once, as --workers
// does, would write the same file), files each under the commit that last changed it rather than the revision's
// commit, and writes no refs/ (so the cache could not be read offline by revision). Here every write goes to a file
// of its own name and is renamed into place: blobs, snapshot links and refs appear whole or not at all, whichever
// process (or engine) writes them at the same time.
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, rename, rm, stat, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { HubConfig } from '../config/kv-config.js';

/** The files a tokenizer directory is made of (tokenizer.json must be there; the others when the repo has them). */
export const TOKENIZER_FILES = [
  'tokenizer.json',
  'tokenizer_config.json',
  'chat_template.jinja',
  'chat_template.json',
  'special_tokens_map.json',
];
const REQUIRED_FILE = 'tokenizer.json';
const COMMIT = /^[0-9a-f]{40}$/;
const DEFAULT_REVISION = 'main';
/** how long one request to the Hub may take (a tokenizer.json is 2-12 MB) */
const DEFAULT_TIMEOUT_MS = 60_000;
const MAX_REDIRECTS = 5;

/**
 * Why a tokenizer could not be had from the Hub. `retry`: it may be had later without any change here (no network,
 * the Hub down or overloaded); the others need the operator (a token, another repo, a filled cache).
 */
export type HubFailureKind = 'offline' | 'unauthorized' | 'not-found' | 'unreachable' | 'bad-answer' | 'cache';

export class HubError extends Error {
  constructor(
    readonly kind: HubFailureKind,
    message: string,
  ) {
    super(message);
    this.name = 'HubError';
  }

  get retry(): boolean {
    return this.kind === 'unreachable';
  }
}

export interface HubTokenizer {
  /** the snapshot directory: a tokenizer directory as path mode reads one */
  readonly dir: string;
  /** the commit its files are from */
  readonly commit: string;
  /** read from the cache without a download (offline, a pinned commit already there, or the Hub unreachable) */
  readonly fromCache: boolean;
  /** the cache was used because the Hub could not be reached: why */
  readonly staleBecause?: string;
}

export interface HubFetchOptions {
  /** how to make HTTP requests (tests); default: the global fetch */
  readonly fetch?: typeof fetch;
  readonly timeoutMs?: number;
}

/** models--org--name: the repo's folder in the cache, as huggingface_hub names it. */
export function repoFolder(cacheDir: string, repo: string): string {
  return path.join(cacheDir, ['models', ...repo.split('/')].join('--'));
}

/**
 * The tokenizer of `repo` at `revision` (a branch, a tag or a commit; default main): from the cache when offline or
 * when a pinned commit is there, else from the Hub into the cache. Throws HubError.
 */
export async function hubTokenizer(
  repo: string,
  revision: string | undefined,
  hub: HubConfig,
  opts: HubFetchOptions = {},
): Promise<HubTokenizer> {
  const rev = revision ?? DEFAULT_REVISION;
  const storage = repoFolder(hub.cacheDir, repo);
  if (hub.offline || COMMIT.test(rev)) {
    const cached = await cachedSnapshot(storage, rev);
    if (cached) return { ...cached, fromCache: true };
    if (hub.offline)
      throw new HubError('offline', `HF_HUB_OFFLINE is set and ${repo}@${rev} has no tokenizer.json in the cache ${hub.cacheDir}`);
  }
  try {
    return { ...(await download(repo, rev, storage, hub, opts)), fromCache: false };
  } catch (err) {
    const failure = asHubError(err, repo, hub);
    if (!failure.retry && failure.kind !== 'cache') throw failure;
    // the Hub cannot be reached (or the cache not written): what the cache holds for the revision is used, as
    // huggingface_hub does
    const cached = await cachedSnapshot(storage, rev);
    if (cached) return { ...cached, fromCache: true, staleBecause: failure.message };
    throw failure;
  }
}

/** The snapshot directory of `revision` (a commit, or a ref under refs/) when it holds a tokenizer.json. */
export async function cachedSnapshot(storage: string, revision: string): Promise<{ dir: string; commit: string } | undefined> {
  const commit = COMMIT.test(revision) ? revision : (await readFile(path.join(storage, 'refs', revision), 'utf8').catch(() => '')).trim();
  if (!COMMIT.test(commit)) return undefined;
  const dir = path.join(storage, 'snapshots', commit);
  const file = await stat(path.join(dir, REQUIRED_FILE)).catch(() => undefined);
  return file?.isFile() ? { dir, commit } : undefined;
}

async function download(
  repo: string,
  revision: string,
  storage: string,
  hub: HubConfig,
  opts: HubFetchOptions,
): Promise<{ dir: string; commit: string }> {
  const { fileDownloadInfo, pathsInfo, downloadFile } = await import('@huggingface/hub');
  const seen: { commit?: string } = {};
  const fetchImpl = hubFetch(opts.fetch ?? fetch, opts.timeoutMs ?? DEFAULT_TIMEOUT_MS, seen);
  const common = { repo: { type: 'model' as const, name: repo }, hubUrl: hub.endpoint, fetch: fetchImpl, ...credentials(hub) };
  // the revision's commit: named by the Hub on the answer for the one file every tokenizer has (X-Repo-Commit)
  const probe = await fileDownloadInfo({ ...common, path: REQUIRED_FILE, revision });
  if (probe === null) throw new HubError('not-found', `${repo}@${revision} has no ${REQUIRED_FILE}`);
  const commit = COMMIT.test(revision) ? revision : seen.commit;
  if (commit === undefined) throw new HubError('bad-answer', `${hub.endpoint} named no commit (X-Repo-Commit) for ${repo}@${revision}`);
  // every file at that commit, so that the files agree even if the branch moves meanwhile
  const infos = await pathsInfo({ ...common, paths: TOKENIZER_FILES, revision: commit });
  const files = infos.filter((i) => i.type === 'file' && TOKENIZER_FILES.includes(i.path));
  if (!files.some((f) => f.path === REQUIRED_FILE)) throw new HubError('not-found', `${repo}@${commit} has no ${REQUIRED_FILE}`);
  const snapshot = path.join(storage, 'snapshots', commit);
  await mkdir(path.join(storage, 'blobs'), { recursive: true });
  await mkdir(snapshot, { recursive: true });
  for (const info of files) {
    // blobs are named as huggingface_hub names them: the LFS sha256, else the git blob id
    const etag = info.lfs?.oid ?? info.oid;
    if (etag === undefined || !/^[0-9a-f]{40,64}$/.test(etag)) throw new HubError('bad-answer', `${repo}: no id for ${info.path}`);
    const size = info.lfs?.size ?? info.size;
    const link = path.join(snapshot, info.path);
    // a snapshot file already there (a cache filled by the engines, perhaps read-only) is left as it is
    if ((await stat(link).catch(() => undefined))?.size === size) continue;
    const blob = path.join(storage, 'blobs', etag);
    if ((await stat(blob).catch(() => undefined))?.size !== size) {
      const body = await downloadFile({ ...common, path: info.path, revision: commit });
      if (body === null) throw new HubError('not-found', `${repo}@${commit} has no ${info.path}`);
      const bytes = new Uint8Array(await body.arrayBuffer());
      if (bytes.byteLength !== size)
        throw new HubError('bad-answer', `${repo}: ${info.path} came as ${bytes.byteLength} bytes, the Hub said ${size}`);
      await writeWhole(blob, bytes);
    }
    await linkWhole(link, path.join('..', '..', 'blobs', etag));
  }
  if (revision !== commit) {
    // the ref lets an offline start (or an engine) find the snapshot by its revision; a read-only cache keeps its own
    const ref = path.join(storage, 'refs', revision);
    await mkdir(path.dirname(ref), { recursive: true })
      .then(() => writeWhole(ref, commit))
      .catch(() => undefined);
  }
  return { dir: snapshot, commit };
}

function credentials(hub: HubConfig): { accessToken?: string } {
  return hub.token !== undefined ? { accessToken: hub.token } : {};
}

/** A name no other writer uses, in the same directory (a rename within it is atomic). */
function tempName(file: string): string {
  return `${file}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
}

async function writeWhole(file: string, data: Uint8Array | string): Promise<void> {
  const tmp = tempName(file);
  try {
    await writeFile(tmp, data);
    await rename(tmp, file);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
}

/** snapshots/<commit>/<file> -> ../../blobs/<etag>, made under another name and renamed over whatever is there. */
async function linkWhole(link: string, target: string): Promise<void> {
  const tmp = tempName(link);
  try {
    await symlink(target, tmp);
  } catch {
    // no symbolic links on this file system: a copy of the blob, as huggingface_hub does there
    await writeFile(tmp, await readFile(path.resolve(path.dirname(link), target)));
  }
  try {
    await rename(tmp, link);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
}

/**
 * The fetch @huggingface/hub is given: each request bounded in time, and redirects followed here so that the Hub's
 * own answer is seen before a CDN's (the commit a revision names is on the Hub's answer: X-Repo-Commit). The token is
 * sent to the Hub only, never to another origin a redirect leads to.
 */
function hubFetch(base: typeof fetch, timeoutMs: number, seen: { commit?: string }): typeof fetch {
  return async (input, init) => {
    let url = new URL(input instanceof Request ? input.url : String(input));
    const origin = url.origin;
    let headers = new Headers(init?.headers);
    for (let hop = 0; ; hop++) {
      const res = await base(url, { ...init, headers, redirect: 'manual', signal: AbortSignal.timeout(timeoutMs) });
      const commit = res.headers.get('x-repo-commit');
      if (commit !== null && seen.commit === undefined && COMMIT.test(commit)) seen.commit = commit;
      const location = res.headers.get('location');
      if (res.status < 300 || res.status > 399 || location === null) return res;
      await res.body?.cancel();
      if (hop >= MAX_REDIRECTS) throw new HubError('bad-answer', `more than ${MAX_REDIRECTS} redirects from ${origin}`);
      url = new URL(location, url);
      if (url.origin !== origin) {
        headers = new Headers(headers);
        headers.delete('authorization');
      }
    }
  };
}

/** What went wrong, in the words the router says it with. */
function asHubError(err: unknown, repo: string, hub: HubConfig): HubError {
  if (err instanceof HubError) return err;
  const status = (err as { statusCode?: unknown }).statusCode;
  if (typeof status === 'number') {
    const said = hubMessage(err);
    const answered = `${hub.endpoint} answered ${status} for ${repo}${said ? ` (${said})` : ''}`;
    if (status === 401 || status === 403)
      return new HubError(
        'unauthorized',
        `${answered}: a gated or private repo, or none of that name${hub.token === undefined ? '; no token given (HF_TOKEN or --hf-token-file)' : ''}`,
      );
    if (status === 404) return new HubError('not-found', answered);
    return new HubError(status === 429 || status >= 500 ? 'unreachable' : 'bad-answer', answered);
  }
  if (err instanceof TypeError && /hf_/.test(err.message)) return new HubError('unauthorized', 'the Hub token does not start with hf_');
  const e = err as { name?: string; message?: string; code?: string; cause?: { code?: string; message?: string } };
  if (e.name === 'TimeoutError' || e.name === 'AbortError')
    return new HubError('unreachable', `${hub.endpoint} did not answer in time for ${repo}`);
  if (err instanceof TypeError)
    return new HubError('unreachable', `${hub.endpoint} cannot be reached (${e.cause?.code ?? e.cause?.message ?? e.message})`);
  if (typeof e.code === 'string') return new HubError('cache', `the cache ${hub.cacheDir} cannot be written (${e.code})`);
  return new HubError('bad-answer', `${hub.endpoint}: ${e.message ?? String(err)}`);
}

/** The Hub's own words in an error of @huggingface/hub, without the URL and request id it appends. */
function hubMessage(err: unknown): string {
  const message = (err as Error).message ?? '';
  return (
    message
      .split('. URL: ')[0]
      ?.replace(/^Api error with status \d+$/, '')
      .slice(0, 200) ?? ''
  );
}
