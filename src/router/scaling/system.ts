// Builds the demand view of a router instance from its configuration: its own processes plus, for the KEDA scaler,
// the peer replicas (--scaler-peers, --scaler-peer-selector). Used by a single router process and by the primary of
// --workers alike, so both answer the same way.
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
 * The instance's demand view. Peers are asked only when the KEDA scaler runs (nothing else needs the system's sum).
 * `locals` gives this instance's process snapshots.
 */
export function instanceDemand(
  config: RouterConfig,
  instance: string,
  locals: () => Promise<ReceivedSnapshot[]>,
  log: Logger,
): { view: AggregateDemand; stop: () => void } {
  const s = config.scaling;
  const list = s.kedaScalerPort !== undefined ? peerList(config, log) : undefined;
  const key = config.security.apiKeys[0];
  const peers = list
    ? new PeerDemand(
        list,
        {
          self: instance,
          timeoutMs: s.peerTimeoutMs,
          maxAgeMs: s.graceMs,
          // a peer's /demand is behind the replicas' shared API keys when there is no admin port
          authorization: () => (config.security.adminPort === undefined && key ? `Bearer ${key}` : undefined),
        },
        log,
      )
    : undefined;
  return { view: new AggregateDemand({ instance, locals, peers, graceMs: s.graceMs }), stop: () => peers?.stop() };
}
