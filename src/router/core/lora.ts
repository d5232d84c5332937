// LoRA adapter words: an adapter a source declares (name, base model, where its weights are), one an engine lists as
// loaded, and what loading and unloading adapters reports. The parsers of the two declaration forms (the
// --lora-adapters flag and the llm-router/lora-adapters workload annotation) live here so that both read them alike.
import type { Endpoint } from './endpoint.js';
import type { InFlightLedger } from './forward.js';

/** An adapter the router may load on demand: its base model's engines load `path` under `name`. */
export interface AdapterDeclaration {
  readonly name: string;
  readonly base: string;
  /** what the engine's load call gets as lora_path (a directory, a Hugging Face id, ...) */
  readonly path: string;
}

/**
 * How an engine answers an inference request for an adapter it does not hold: vLLM 404; SGLang 400 whose body says the
 * adapter is not loaded (its other 400s are the client's, passed on).
 */
export interface MissingAdapterAnswer {
  readonly status: number;
  /** the body must match too; the body is then held (up to a small bound) until it can be judged */
  readonly message?: RegExp;
}

/** vLLM's answer for an adapter it does not hold (404), and the judgement when an engine kind names none. */
export const VLLM_MISSING: MissingAdapterAnswer = { status: 404 };

/**
 * Whether an engine's answer says it does not hold the adapter: the status of its kind, and its body matching when the
 * kind needs that (SGLang). The plain path (src/router/proxy/attempt.ts) and a P/D prefill judge by this alone.
 */
export function saysAdapterMissing(missing: MissingAdapterAnswer, status: number, body: Buffer | undefined): boolean {
  if (status !== missing.status) return false;
  return missing.message === undefined || (body !== undefined && missing.message.test(body.toString('utf8')));
}

/** A name the router can give an engine and a client can send: no blanks, commas, `=` or `@`. */
export function isAdapterName(name: string): boolean {
  return name.length > 0 && name.length <= 512 && !/[\s,=@]/.test(name);
}

export type Parsed<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly why: string };

/** One `NAME=PATH` pair of the workload annotation; the base is the workload's model. */
export function parseAdapterPair(text: string, base: string): Parsed<AdapterDeclaration> {
  const eq = text.indexOf('=');
  const name = text.slice(0, eq).trim();
  const path = text.slice(eq + 1).trim();
  if (eq <= 0 || !path) return { ok: false, why: `${JSON.stringify(text.trim())} must look like NAME=PATH` };
  if (!isAdapterName(name)) return { ok: false, why: `${JSON.stringify(name)} is not an adapter name (no blanks, commas, = or @)` };
  return { ok: true, value: { name, base, path } };
}

/** One `NAME@BASE=PATH` entry of --lora-adapters. */
export function parseAdapterFlag(text: string): Parsed<AdapterDeclaration> {
  const at = text.indexOf('@');
  const eq = text.indexOf('=', at + 1);
  if (at <= 0 || eq < 0) return { ok: false, why: `${JSON.stringify(text.trim())} must look like NAME@BASE=PATH` };
  const base = text.slice(at + 1, eq).trim();
  if (!base || /[\s,]/.test(base)) return { ok: false, why: `${JSON.stringify(text.trim())}: the base model is missing or has blanks` };
  return parseAdapterPair(`${text.slice(0, at)}=${text.slice(eq + 1)}`, base);
}

/** The `NAME=PATH,NAME2=PATH2` annotation of a base model's workload: the adapters, and the entries that are not. */
export function parseAdapterAnnotation(value: string, base: string): { adapters: AdapterDeclaration[]; invalid: string[] } {
  const adapters: AdapterDeclaration[] = [];
  const invalid: string[] = [];
  for (const part of value.split(',')) {
    if (part.trim() === '') continue;
    const p = parseAdapterPair(part, base);
    if (p.ok) adapters.push(p.value);
    else invalid.push(p.why);
  }
  return { adapters, invalid };
}

/** How an adapter came to be unloaded. */
export type UnloadReason = 'evicted';

/** How a load call ended: loaded (200, or 400 "already loaded": another router did it), or failed with the engine's words. */
export type LoadResult = 'loaded' | 'already-loaded' | 'failed' | 'unsupported';

/** Where adapter loads and unloads are reported: metrics and the operator's timeline. */
export interface AdapterObserver {
  loaded(e: { adapter: string; endpoint: string; result: LoadResult; seconds: number; detail: string }): void;
  unloaded(e: { adapter: string; endpoint: string; reason: UnloadReason; ok: boolean; detail: string }): void;
  /** a request for an adapter was forwarded; `waited`: it waited for a load first */
  request(adapter: string, waited: boolean): void;
}

/** Counts an adapter's requests per endpoint (whether it is idle there), and hears that an engine no longer holds it. */
export interface AdapterLedger extends InFlightLedger {
  /** the endpoint answered 404 for the adapter: it does not hold it (an engine restarted, another router unloaded it) */
  missing(endpoint: Endpoint): void;
}
