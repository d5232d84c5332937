// The catalog's answer for a LoRA adapter, from its declaration (if any), the endpoints that list it loaded and its base
// model's own answer. Pure: the same declarations and engine listings give the same answer in every router process,
// whatever this process loaded itself.
import type { Endpoint } from '../core/endpoint.js';
import type { AdapterDeclaration } from '../core/lora.js';
import type { AdapterRoute, AdapterView, ModelState, PdRoute } from '../core/model.js';
import type { PdRole } from '../core/pd.js';

/** What the catalog knows of a base model when it answers for one of its adapters. */
export interface BaseAnswer {
  readonly state: ModelState;
  /** ready endpoints a request can go to (a P/D base: the decode side) */
  readonly candidates: readonly Endpoint[];
  /** a P/D base: its protocol and ready prefill endpoints */
  readonly route?: PdRoute;
  readonly missing?: readonly PdRole[];
}

export interface AdapterAnswer {
  readonly state: ModelState;
  /** the ready endpoints that have it loaded (the decode side for a P/D base) */
  readonly candidates: readonly Endpoint[];
  readonly route?: PdRoute;
  readonly missing?: readonly PdRole[];
  readonly adapter: AdapterRoute;
  readonly view: AdapterView;
  readonly counts: { readonly endpoints: number; readonly ready: number };
}

function ready(e: Endpoint): boolean {
  return e.state === 'ready' && !e.draining;
}

/** Endpoints the router may ask to load it: not having it loaded, and not known to refuse loads at run time. */
function mayLoad(endpoints: readonly Endpoint[], name: string): Endpoint[] {
  return endpoints.filter((e) => e.canLoadAdapters !== false && !e.adapters.has(name));
}

/**
 * An adapter is ready when a ready endpoint has it loaded, or when it is declared and a ready endpoint of its base may load
 * it (the first request loads it). A declared adapter is otherwise in its base's state (scaled-to-zero, loading, ...),
 * or unavailable when the base is ready but none of its endpoints loads adapters at run time. An adapter only engines
 * serve is ready where they are ready, else loading or unavailable as their states say.
 */
export function adapterAnswer(
  name: string,
  declaration: AdapterDeclaration | undefined,
  /** every endpoint that lists it, in a fixed order */
  listing: readonly Endpoint[],
  base: BaseAnswer | undefined,
): AdapterAnswer {
  const parent = declaration?.base ?? listing[0]?.adapters.get(name) ?? '';
  const loadedReady = listing.filter(ready);
  const loadedDecode = loadedReady.filter((e) => e.role !== 'prefill');
  const loadedPrefill = loadedReady.filter((e) => e.role === 'prefill');
  const loadable = declaration ? mayLoad(base?.candidates ?? [], name) : [];
  const loadablePrefill = declaration ? mayLoad(base?.route?.prefill ?? [], name) : [];
  let state: ModelState;
  let missing: readonly PdRole[] | undefined;
  if (loadedDecode.length > 0) state = 'ready';
  else if (declaration && base?.state === 'ready') state = loadable.length > 0 ? 'ready' : 'unavailable';
  else if (declaration) {
    state = base?.state ?? 'scaled-to-zero';
    missing = base?.missing;
  } else state = listing.some((e) => !e.draining && (e.state === 'discovered' || e.state === 'serving-api')) ? 'loading' : 'unavailable';
  const live = listing.filter((e) => !e.draining).length;
  return {
    state,
    candidates: loadedDecode,
    ...(base?.route ? { route: { protocol: base.route.protocol, prefill: loadedPrefill } } : {}),
    ...(missing && missing.length > 0 ? { missing } : {}),
    adapter: {
      name,
      base: parent,
      path: declaration?.path,
      endpoints: [...loadedDecode, ...loadable],
      prefill: [...loadedPrefill, ...loadablePrefill],
    },
    view: { parent, ...(declaration ? { path: declaration.path } : {}), loadedEndpoints: live },
    counts: { endpoints: live, ready: loadedReady.length },
  };
}
