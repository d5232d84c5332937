// Static discovery: declarations and endpoints straight from configuration. It is in sync the moment it is applied.
import type { ModelCatalog } from '../catalog/catalog.js';
import type { LoraConfig, StaticBackend } from '../config/config.js';

/** the declaration source of --lora-adapters */
export const LORA_ADAPTERS_SOURCE = 'lora-adapters';

export interface StaticSource {
  readonly knownModels: readonly string[];
  readonly staticBackends: readonly StaticBackend[];
  readonly aliases: ReadonlyMap<string, string>;
  readonly lora: Pick<LoraConfig, 'adapters'>;
}

export function applyStaticSource(catalog: ModelCatalog, source: StaticSource): void {
  catalog.setDeclarations('known-models', source.knownModels);
  catalog.setDeclarations(
    'static',
    source.staticBackends.flatMap((b) => b.models.map((model) => ({ model, role: b.role }))),
  );
  catalog.setAdapterDeclarations(LORA_ADAPTERS_SOURCE, source.lora.adapters);
  catalog.setAliases(source.aliases);
  catalog.setEndpoints(
    'static',
    source.staticBackends.map((b) => ({
      id: b.url,
      url: b.url,
      models: b.models,
      role: b.role,
      ...(b.kvEvents ? { kvEvents: b.kvEvents } : {}),
    })),
  );
}
