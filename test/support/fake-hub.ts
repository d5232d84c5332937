// A stand-in for the Hugging Face Hub on 127.0.0.1, speaking its file API as @huggingface/hub (and huggingface_hub)
// use it, so the router's tokenizer download is tested without any outside address:
//  - GET|HEAD /{repo}/resolve/{revision}/{path}: the file, with `Range` (206 + Content-Range), `ETag` (the git blob id),
//    `X-Repo-Commit` (the revision's commit); a file stored in LFS answers 302 to /cdn/{sha256} with `X-Linked-Etag`
//    and `X-Linked-Size`, as the Hub sends LFS files to its CDN;
//  - POST /api/models/{repo}/paths-info/{revision} ({paths, expand}): the entries that exist, each with `oid`, `size`,
//    `lfs` ({oid, size, pointerSize}) for LFS files, and `lastCommit` when expanded;
//  - a gated repo answers 401 (X-Error-Code: GatedRepo) without its token; a missing repo 404 RepoNotFound, a missing
//    revision 404 RevisionNotFound, a missing file 404 EntryNotFound.
// Every request is recorded (method and path), so a test can tell that nothing was asked.
import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FakeRepoSpec {
  /** path -> content, at the repo's first commit on `main` */
  readonly files: Readonly<Record<string, string | Buffer>>;
  /** the repo is gated: requests need `Authorization: Bearer <token>` */
  readonly token?: string;
  /** files stored in LFS (the resolve answers a redirect to the CDN) */
  readonly lfs?: readonly string[];
}

interface StoredFile {
  readonly data: Buffer;
  /** git blob id */
  readonly oid: string;
  readonly sha256: string;
  readonly lfs: boolean;
}

interface Commit {
  readonly id: string;
  readonly files: ReadonlyMap<string, StoredFile>;
}

interface Repo {
  readonly token: string | undefined;
  readonly commits: Commit[];
  readonly refs: Map<string, string>;
}

function gitOid(data: Buffer): string {
  return createHash('sha1').update(`blob ${data.byteLength}\0`).update(data).digest('hex');
}

export class FakeHub {
  /** every request, as "METHOD /path", with " (bytes=A-B)" when it asked for a range */
  readonly requests: string[] = [];
  private readonly repos = new Map<string, Repo>();
  private readonly blobs = new Map<string, Buffer>();
  /** answer every request with this status (the Hub down or overloaded) */
  private failing: number | undefined;

  private constructor(private readonly server: http.Server) {}

  static async start(repos: Readonly<Record<string, FakeRepoSpec>> = {}): Promise<FakeHub> {
    const server = http.createServer();
    const hub = new FakeHub(server);
    for (const [name, spec] of Object.entries(repos)) hub.addRepo(name, spec);
    server.on('request', (req, res) => hub.answer(req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return hub;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  addRepo(name: string, spec: FakeRepoSpec): void {
    this.repos.set(name, { token: spec.token, commits: [], refs: new Map() });
    this.commit(name, spec.files, spec.lfs ?? []);
  }

  /** A new commit on `main` with these files (what the repo had is replaced); returns its id. */
  commit(name: string, files: Readonly<Record<string, string | Buffer>>, lfs: readonly string[] = []): string {
    const repo = this.repos.get(name);
    if (!repo) throw new Error(`no repo ${name}`);
    const stored = new Map<string, StoredFile>();
    for (const [path, content] of Object.entries(files)) {
      const data = Buffer.isBuffer(content) ? content : Buffer.from(content);
      const sha256 = createHash('sha256').update(data).digest('hex');
      stored.set(path, { data, oid: gitOid(data), sha256, lfs: lfs.includes(path) });
      this.blobs.set(sha256, data);
    }
    const id = createHash('sha1').update(`${name}#${repo.commits.length}`).digest('hex');
    repo.commits.push({ id, files: stored });
    repo.refs.set('main', id);
    return id;
  }

  /** Every answer is this status from now on (undefined: answer again). */
  fail(status: number | undefined): void {
    this.failing = status;
  }

  /** Requests whose path contains `part`. */
  asked(part: string): string[] {
    return this.requests.filter((r) => r.includes(part));
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private answer(req: http.IncomingMessage, res: http.ServerResponse): void {
    const url = new URL(req.url ?? '/', 'http://hub');
    // the revision is one path segment, URL-encoded (refs/pr/1 is refs%2Fpr%2F1): matched before decoding
    const path = url.pathname;
    this.requests.push(`${req.method} ${decodeURIComponent(path)}${req.headers.range ? ` (${req.headers.range})` : ''}`);
    if (this.failing !== undefined) return error(res, this.failing, 'ServiceUnavailable', 'the Hub is down');
    if (path.startsWith('/cdn/')) {
      const sha256 = path.slice('/cdn/'.length);
      return this.sendFile(req, res, this.blobs.get(sha256), { etag: `"${sha256}"` });
    }
    const info = /^\/api\/models\/(.+)\/paths-info\/(.+)$/.exec(path);
    const d = (m: RegExpExecArray, i: number): string => decodeURIComponent(m[i] as string);
    if (info && req.method === 'POST') return this.pathsInfo(req, res, d(info, 1), d(info, 2));
    const resolve = /^\/(.+?)\/resolve\/([^/]+)\/(.+)$/.exec(path);
    if (resolve && (req.method === 'GET' || req.method === 'HEAD'))
      return this.resolve(req, res, d(resolve, 1), d(resolve, 2), d(resolve, 3));
    error(res, 404, undefined, 'Not Found');
  }

  /** The repo and the commit a request names, or the error it was answered with. */
  private find(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    name: string,
    revision: string,
  ): { repo: Repo; commit: Commit } | undefined {
    const repo = this.repos.get(name);
    if (!repo) {
      error(res, 404, 'RepoNotFound', `Repository Not Found for url: ${req.url}.`);
      return undefined;
    }
    if (repo.token !== undefined && req.headers.authorization !== `Bearer ${repo.token}`) {
      error(res, 401, 'GatedRepo', `Access to model ${name} is restricted. You must have access to it and be authenticated to access it.`);
      return undefined;
    }
    const id = repo.refs.get(revision) ?? revision;
    const commit = repo.commits.find((c) => c.id === id);
    if (!commit) {
      error(res, 404, 'RevisionNotFound', `Invalid rev id: ${revision}`);
      return undefined;
    }
    return { repo, commit };
  }

  private resolve(req: http.IncomingMessage, res: http.ServerResponse, name: string, revision: string, file: string): void {
    const found = this.find(req, res, name, revision);
    if (!found) return;
    const stored = found.commit.files.get(file);
    if (!stored) return error(res, 404, 'EntryNotFound', `Entry not found`, { 'x-repo-commit': found.commit.id });
    const head = { 'x-repo-commit': found.commit.id, etag: `"${stored.oid}"` };
    if (stored.lfs) {
      res.writeHead(302, {
        ...head,
        location: `/cdn/${stored.sha256}`,
        'x-linked-etag': `"${stored.sha256}"`,
        'x-linked-size': String(stored.data.byteLength),
        'content-length': '0',
      });
      res.end();
      return;
    }
    this.sendFile(req, res, stored.data, head);
  }

  private sendFile(req: http.IncomingMessage, res: http.ServerResponse, data: Buffer | undefined, head: Record<string, string>): void {
    if (!data) return error(res, 404, 'EntryNotFound', 'Entry not found');
    const total = data.byteLength;
    const range = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? '');
    let start = 0;
    let end = total - 1;
    if (range) {
      start = Number(range[1]);
      end = range[2] === '' ? total - 1 : Math.min(Number(range[2]), total - 1);
      if (start > end) {
        res.writeHead(416, { 'content-range': `bytes */${total}` });
        res.end();
        return;
      }
    }
    const body = data.subarray(start, end + 1);
    res.writeHead(range ? 206 : 200, {
      ...head,
      'content-type': 'application/octet-stream',
      'accept-ranges': 'bytes',
      'content-length': String(body.byteLength),
      ...(range ? { 'content-range': `bytes ${start}-${end}/${total}` } : {}),
    });
    res.end(req.method === 'HEAD' ? undefined : body);
  }

  private pathsInfo(req: http.IncomingMessage, res: http.ServerResponse, name: string, revision: string): void {
    let text = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => {
      text += chunk;
    });
    req.on('end', () => {
      const found = this.find(req, res, name, revision);
      if (!found) return;
      let asked: { paths?: unknown; expand?: unknown };
      try {
        asked = JSON.parse(text) as typeof asked;
      } catch {
        return error(res, 400, undefined, 'invalid JSON');
      }
      const paths = Array.isArray(asked.paths) ? asked.paths.filter((p): p is string => typeof p === 'string') : [];
      const entries = paths.flatMap((p) => {
        const f = found.commit.files.get(p);
        if (!f) return [];
        return [
          {
            type: 'file',
            path: p,
            oid: f.oid,
            size: f.data.byteLength,
            ...(f.lfs ? { lfs: { oid: f.sha256, size: f.data.byteLength, pointerSize: 134 } } : {}),
            ...(asked.expand === true ? { lastCommit: { id: found.commit.id, title: 'upload', date: '2025-01-01T00:00:00.000Z' } } : {}),
          },
        ];
      });
      const body = JSON.stringify(entries);
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    });
  }
}

function error(
  res: http.ServerResponse,
  status: number,
  code: string | undefined,
  message: string,
  extra: Record<string, string> = {},
): void {
  const body = JSON.stringify({ error: message });
  res.writeHead(status, {
    ...extra,
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
    ...(code ? { 'x-error-code': code } : {}),
  });
  res.end(body);
}
