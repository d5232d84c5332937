// A package loaded on first use instead of at start. Each `llm-router serve` and `sim` pays for every module it
// imports before it listens (~1 ms of CPU per module file); packages only some settings use (ZeroMQ and msgpack for
// KV-cache events, the Hugging Face tokenizer and template engine, busboy for uploads, yaml for files) are loaded
// with require() when first called for. In the router and the simulator each of these packages is loaded only
// through its loader, so there is one copy of it in the process (a test that also imports one gets the package's ESM
// build beside it: harmless, nothing of one copy is handed to the other).
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

/** A function that returns package `id`, loaded by require() on its first call. */
export function lazyModule<T>(id: string): () => T {
  let loaded: T | undefined;
  return () => {
    loaded ??= require(id) as T;
    return loaded;
  };
}
