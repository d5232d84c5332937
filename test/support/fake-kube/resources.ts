// The resource types the fake API server knows, and the discovery documents kubectl reads to map
// kinds and short names onto URLs.

export interface ResourceType {
  /** '' for the core group */
  readonly group: string;
  readonly version: string;
  readonly plural: string;
  readonly singular: string;
  readonly kind: string;
  readonly namespaced: boolean;
  readonly shortNames: readonly string[];
  /** true when spec.replicas is exposed through the scale subresource */
  readonly scalable: boolean;
}

export const apiVersionOf = (type: ResourceType): string => (type.group === '' ? type.version : `${type.group}/${type.version}`);

const VERBS = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'];

export const PODS: ResourceType = {
  group: '',
  version: 'v1',
  plural: 'pods',
  singular: 'pod',
  kind: 'Pod',
  namespaced: true,
  shortNames: ['po'],
  scalable: false,
};
export const NAMESPACES: ResourceType = {
  group: '',
  version: 'v1',
  plural: 'namespaces',
  singular: 'namespace',
  kind: 'Namespace',
  namespaced: false,
  shortNames: ['ns'],
  scalable: false,
};
export const DEPLOYMENTS: ResourceType = {
  group: 'apps',
  version: 'v1',
  plural: 'deployments',
  singular: 'deployment',
  kind: 'Deployment',
  namespaced: true,
  shortNames: ['deploy'],
  scalable: true,
};
export const STATEFULSETS: ResourceType = {
  group: 'apps',
  version: 'v1',
  plural: 'statefulsets',
  singular: 'statefulset',
  kind: 'StatefulSet',
  namespaced: true,
  shortNames: ['sts'],
  scalable: true,
};
export const LEADER_WORKER_SETS: ResourceType = {
  group: 'leaderworkerset.x-k8s.io',
  version: 'v1',
  plural: 'leaderworkersets',
  singular: 'leaderworkerset',
  kind: 'LeaderWorkerSet',
  namespaced: true,
  shortNames: ['lws'],
  scalable: true,
};

export class ResourceRegistry {
  readonly types: readonly ResourceType[];

  constructor(withLeaderWorkerSets: boolean) {
    this.types = [PODS, NAMESPACES, DEPLOYMENTS, STATEFULSETS, ...(withLeaderWorkerSets ? [LEADER_WORKER_SETS] : [])];
  }

  byPath(group: string, version: string, plural: string): ResourceType | undefined {
    return this.types.find((t) => t.group === group && t.version === version && t.plural === plural);
  }

  /** Accepts a kind ('Pod'), a plural ('pods'), a singular or a short name, case-insensitively. */
  byName(name: string): ResourceType | undefined {
    const n = name.toLowerCase();
    return this.types.find((t) => t.kind.toLowerCase() === n || t.plural === n || t.singular === n || t.shortNames.includes(n));
  }

  byKind(apiVersion: string | undefined, kind: string): ResourceType | undefined {
    return this.types.find((t) => t.kind === kind && (apiVersion === undefined || apiVersionOf(t) === apiVersion));
  }

  groups(): string[] {
    return [...new Set(this.types.map((t) => t.group).filter((g) => g !== ''))];
  }

  /** APIResourceList for /api/v1 or /apis/GROUP/VERSION, or undefined when that group version is not served. */
  resourceList(group: string, version: string): object | undefined {
    const types = this.types.filter((t) => t.group === group && t.version === version);
    if (types.length === 0) return undefined;
    const resources: object[] = [];
    for (const t of types) {
      resources.push({
        name: t.plural,
        singularName: t.singular,
        namespaced: t.namespaced,
        kind: t.kind,
        verbs: VERBS,
        shortNames: t.shortNames,
      });
      resources.push({
        name: `${t.plural}/status`,
        singularName: '',
        namespaced: t.namespaced,
        kind: t.kind,
        verbs: ['get', 'patch', 'update'],
      });
      if (t.scalable) {
        resources.push({
          name: `${t.plural}/scale`,
          singularName: '',
          namespaced: t.namespaced,
          group: 'autoscaling',
          version: 'v1',
          kind: 'Scale',
          verbs: ['get', 'patch', 'update'],
        });
      }
    }
    return { kind: 'APIResourceList', apiVersion: 'v1', groupVersion: group === '' ? version : `${group}/${version}`, resources };
  }

  /** APIGroupList for /apis. */
  groupList(): object {
    return {
      kind: 'APIGroupList',
      apiVersion: 'v1',
      groups: this.groups().map((g) => this.group(g)),
    };
  }

  /** APIGroup for /apis/GROUP. */
  group(name: string): object {
    const version = this.types.find((t) => t.group === name)?.version ?? 'v1';
    const gv = { groupVersion: `${name}/${version}`, version };
    return { kind: 'APIGroup', apiVersion: 'v1', name, versions: [gv], preferredVersion: gv };
  }
}

export const VERSION_INFO = {
  major: '1',
  minor: '32',
  gitVersion: 'v1.32.0-fake',
  gitCommit: '0000000000000000000000000000000000000000',
  gitTreeState: 'clean',
  buildDate: '2024-12-11T00:00:00Z',
  goVersion: 'go1.23.4',
  compiler: 'gc',
  platform: 'linux/amd64',
};
