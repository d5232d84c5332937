// Engines: the kinds the router knows how to probe and scrape, and the clients it can reach them with.

/** How to tell that an engine has loaded its model (probe rules, metric names). `openai`: any OpenAI-compatible API. */
export const ENGINE_KINDS = ['vllm', 'sglang', 'tgi', 'openai'] as const;
export type EngineKind = (typeof ENGINE_KINDS)[number];

/** The engine client carrying requests: the router's own HTTP/1.1 client, or undici's Pool (benchmark comparison). */
export type EngineClientKind = 'h1' | 'undici';

/** An engine client's connections and queue now (llm_router_engine_connections*, llm_router_engine_requests_queued). */
export interface EngineClientStats {
  /** sockets open, connecting ones included */
  readonly open: number;
  /** of those, the ones carrying a request (or connecting for one) */
  readonly busy: number;
  /** requests waiting for a connection under the cap */
  readonly queued: number;
}
