// A package loaded on first use instead of at start. Each `llm-router serve` and `sim` pays for every module it
// imports before it listens (~1 ms of CPU per module file); packages only some settings use (ZeroMQ and msgpack for
// KV-cache events, the Hugging Face tokenizer and template engine, busboy for uploads, yaml for files) are loaded
// with require() when first called for. Each package named here is loaded only through its loader, so there is one
// copy of it in the process.
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
