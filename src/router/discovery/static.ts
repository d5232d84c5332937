// Static discovery: declarations and endpoints straight from configuration. It is in sync the moment it is applied.
import type { ModelCatalog } from '../catalog/catalog.js';
import type { StaticBackend } from '../config/config.js';

export interface StaticSource {
  readonly knownModels: readonly string[];
  readonly staticBackends: readonly StaticBackend[];
  readonly aliases: ReadonlyMap<string, string>;
}

export function applyStaticSource(catalog: ModelCatalog, source: StaticSource): void {
  catalog.setDeclarations('known-models', source.knownModels);
  catalog.setDeclarations(
    'static',
    source.staticBackends.flatMap((b) => b.models.map((model) => ({ model, role: b.role }))),
  );
  catalog.setAliases(source.aliases);
  catalog.setEndpoints(
    'static',
    source.staticBackends.map((b) => ({ id: b.url, url: b.url, models: b.models, role: b.role })),
  );
}
