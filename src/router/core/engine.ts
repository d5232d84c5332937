// Engines: the kinds the router knows how to probe and scrape, and the clients it can reach them with.

/** How to tell that an engine has loaded its model (probe rules, metric names). `openai`: any OpenAI-compatible API. */
export const ENGINE_KINDS = ['vllm', 'sglang', 'tgi', 'openai'] as const;
export type EngineKind = (typeof ENGINE_KINDS)[number];

/** The engine client carrying requests: the router's own HTTP/1.1 client, or undici's Pool (benchmark comparison). */
export type EngineClientKind = 'h1' | 'undici';
