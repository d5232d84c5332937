// TLS to https engines, the same for requests, probes and stats scrapes: whom to trust and which client certificate
// to show. Files are read once, at startup.
import { readFileSync } from 'node:fs';
import tls from 'node:tls';

export interface EngineTlsConfig {
  /** PEM file of CAs trusted for engines, in addition to the default ones */
  readonly caFile: string | undefined;
  /** PEM client certificate and key for engines that ask for one (mTLS) */
  readonly clientCertFile: string | undefined;
  readonly clientKeyFile: string | undefined;
  /** do not verify engines' certificates (logged as a warning at startup) */
  readonly insecure: boolean;
}

/** Options for tls.connect (and undici's `connect`), ready to spread. */
export interface EngineTls {
  /** undefined: Node's default roots plus NODE_EXTRA_CA_CERTS, as any Node client trusts */
  readonly ca: readonly string[] | undefined;
  readonly cert: string | undefined;
  readonly key: string | undefined;
  readonly rejectUnauthorized: boolean;
}

export const DEFAULT_ENGINE_TLS: EngineTls = { ca: undefined, cert: undefined, key: undefined, rejectUnauthorized: true };

function read(path: string, what: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new Error(`${what} ${path}: ${(err as Error).message}`);
  }
}

/**
 * Reads the files. Giving `ca` to tls.connect replaces Node's default trust instead of adding to it, so with a CA file
 * the list is rebuilt: Node's bundled roots, the NODE_EXTRA_CA_CERTS file (Node reads it only into its default
 * store), then the file given.
 */
export function loadEngineTls(cfg: EngineTlsConfig, env: Readonly<Record<string, string | undefined>> = process.env): EngineTls {
  let ca: string[] | undefined;
  if (cfg.caFile !== undefined) {
    ca = [...tls.rootCertificates];
    const extra = env.NODE_EXTRA_CA_CERTS;
    if (extra) ca.push(read(extra, 'NODE_EXTRA_CA_CERTS'));
    ca.push(read(cfg.caFile, '--engine-ca-file'));
  }
  return {
    ca,
    cert: cfg.clientCertFile === undefined ? undefined : read(cfg.clientCertFile, '--engine-client-cert'),
    key: cfg.clientKeyFile === undefined ? undefined : read(cfg.clientKeyFile, '--engine-client-key'),
    rejectUnauthorized: !cfg.insecure,
  };
}

/** The options as tls.connect and undici's `connect` take them (no undefined members). */
export function tlsConnectOptions(t: EngineTls): tls.ConnectionOptions {
  const out: tls.ConnectionOptions = { rejectUnauthorized: t.rejectUnauthorized };
  if (t.ca !== undefined) out.ca = [...t.ca];
  if (t.cert !== undefined) out.cert = t.cert;
  if (t.key !== undefined) out.key = t.key;
  return out;
}
