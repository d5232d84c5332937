// Builds the demand view of a router instance from its configuration: its own processes plus, for the KEDA scaler,
// the peer replicas (--scaler-peers, --scaler-peer-selector). Used by a single router process and by the primary of
// --workers alike, so both answer the same way.
import { readFileSync, statSync } from 'node:fs';
import { parseApiKeysFile } from '../config/api-keys-file.js';
import type { RouterConfig } from '../config/config.js';
import { loadKubeConfig, resolveNamespace } from '../discovery/kubernetes/source.js';
import type { Logger } from '../util/log.js';
import type { ReceivedSnapshot } from './demand-snapshot.js';
import { AggregateDemand } from './demand-view.js';
import { PeerPods } from './peer-pods.js';
import { PeerDemand, StaticPeers, type PeerList } from './peers.js';

/** Static peers and peers found in Kubernetes, together. */
class Peers implements PeerList {
  constructor(private readonly lists: readonly PeerList[]) {}
  urls(): readonly string[] {
    return [...new Set(this.lists.flatMap((l) => l.urls()))];
  }
  stop(): void {
    for (const l of this.lists) l.stop();
  }
}

function peerList(config: RouterConfig, log: Logger): PeerList | undefined {
  const s = config.scaling;
  const lists: PeerList[] = [];
  if (s.peers.length > 0) lists.push(new StaticPeers(s.peers));
  if (s.peerSelector) {
    const kubeConfig = loadKubeConfig('--scaler-peer-selector');
    lists.push(
      new PeerPods(
        {
          kubeConfig,
          namespace: resolveNamespace(s.peerNamespace, kubeConfig),
          labelSelector: s.peerSelector,
          defaultPort: config.security.adminPort || config.port,
          resyncMs: config.kubernetes?.resyncMs ?? 300_000,
        },
        log,
      ),
    );
  }
  return lists.length > 0 ? new Peers(lists) : undefined;
}

/**
 * The Authorization a replica shows its peers: the API keys are shared by the replicas, and a peer's /demand sits
 * behind them when it has no admin port (the admin port ignores it). Any configured key does: the first of --api-key
 * (flag or env), else the first of --api-keys-file (the first line's, or the first YAML entry's), re-read when the file changes.
 */
export function peerAuthorization(security: RouterConfig['security']): () => string | undefined {
  const fixed = security.apiKeys[0];
  if (fixed) return () => `Bearer ${fixed}`;
  const file = security.apiKeysFile;
  if (!file) return () => undefined;
  let stamp = '';
  let key: string | undefined;
  return () => {
    try {
      const st = statSync(file);
      const now = `${st.mtimeMs}:${st.size}:${st.ino}`;
      if (now !== stamp) {
        stamp = now;
        key = parseApiKeysFile(readFileSync(file, 'utf8'))[0]?.key;
      }
    } catch {
      // the file is gone for a moment (a Secret being updated) or not valid (the gate keeps the keys read last as well):
      // the key read last still works
    }
    return key === undefined ? undefined : `Bearer ${key}`;
  };
}

/**
 * The instance's demand view. Peers are asked only when the KEDA scaler runs (nothing else needs the system's sum).
 * `locals` gives this instance's process snapshots.
 */
export function createDemandView(
  config: RouterConfig,
  instance: string,
  locals: () => Promise<ReceivedSnapshot[]>,
  log: Logger,
  /** true once the instance is shutting down */
  stopping: () => boolean = () => false,
): { view: AggregateDemand; peers: PeerDemand | undefined; stop: () => Promise<void> } {
  const s = config.scaling;
  const list = s.kedaScalerPort !== undefined ? peerList(config, log) : undefined;
  const peers = list
    ? new PeerDemand(
        list,
        {
          self: instance,
          timeoutMs: s.peerTimeoutMs,
          maxAgeMs: s.graceMs,
          // a peer may have no admin port even when this one has: the key is shown whenever one is configured
          authorization: peerAuthorization(config.security),
        },
        log,
      )
    : undefined;
  const view = new AggregateDemand({ instance, locals, peers, graceMs: s.graceMs, stopping });
  return {
    view,
    peers,
    // the last word: the peers drop this instance at once instead of counting its last snapshot for the grace period
    stop: async () => {
      const outcome = await view.farewell().catch(() => undefined);
      if (outcome && outcome.missed.length > 0)
        log.warn(
          { told: outcome.told, missed: outcome.missed },
          `${outcome.missed.length} scaler peer(s) did not hear that this replica leaves: they count its last demand for the grace period`,
        );
      else if (outcome && outcome.told > 0) log.info({ told: outcome.told }, 'told the scaler peers that this replica leaves');
      peers?.stop();
    },
  };
}
