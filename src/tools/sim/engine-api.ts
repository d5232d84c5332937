// The simulated engine's public surface: the options startSimEngine takes and the handle it resolves to.
import type { Fault, FaultMode, SimPhase, SimStats } from './types.js';
import type { EngineKind } from '../../router/core/engine.js';
import type { EndpointRole, PdProtocol } from '../../router/core/pd.js';
import type { SimLoraOptions } from './lora.js';

export interface SimEngineOptions {
  /** default 127.0.0.1 */
  readonly host?: string;
  /** default 0 (any free port) */
  readonly port?: number;
  /** served model names; default ['sim-model'] */
  readonly models?: readonly string[];
  /** default 'vllm' */
  readonly kind?: EngineKind;
  /** the port refuses connections this long before the engine listens; default 0 */
  readonly startupRefuseSeconds?: number;
  /** then the engine listens but the model is not loaded this long; default 0 */
  readonly startupLoadingSeconds?: number;
  /** time to first token; default 20 */
  readonly ttftMs?: number;
  /** inter-token latency; default 5 */
  readonly itlMs?: number;
  /** tokens generated per request, lowered by its max_tokens; default 16 */
  readonly outputTokens?: number;
  /** requests running at once; later ones wait in FIFO order; default 256 */
  readonly maxNumSeqs?: number;
  /** default 8 */
  readonly embeddingDim?: number;
  /** reported in /v1/models, /info and /tokenize; default 4096 */
  readonly maxModelLen?: number;
  /** prefill time per prompt token not found in the prefix cache, added to the TTFT; default 0 */
  readonly prefillMsPerToken?: number;
  /** prefix cache capacity in blocks (an LRU); 0 turns prefix caching off; default 4096 */
  readonly prefixCacheBlocks?: number;
  /** tokens per prefix-cache block; default 16 (vLLM's block size) */
  readonly prefixBlockTokens?: number;
  /** value of the x-sim-engine header; default sim-<port> */
  readonly id?: string;
  /** fault applied once the engine listens; default none */
  readonly fault?: Fault;
  /** serve https with this PEM certificate and key (an engine behind TLS); default plain http */
  readonly tls?: SimTls;
  /** the P/D half this engine plays; default both (whole requests, no P/D checks) */
  readonly role?: EndpointRole;
  /** the P/D protocol it checks requests against (with role prefill or decode); default vllm-nixl */
  readonly pdProtocol?: PdProtocol;
  /** serve LoRA adapters (vLLM's --enable-lora); default off */
  readonly lora?: SimLoraOptions;
}

export interface SimTls {
  readonly cert: string;
  readonly key: string;
  /** PEM CAs whose client certificates are required (mTLS); default none asked for */
  readonly clientCa?: string;
}

export interface SimEngine {
  readonly port: number;
  /** http://host:port, or https:// when it serves TLS */
  readonly url: string;
  readonly id: string;
  stats(): SimStats;
  resetStats(): void;
  fault(): Fault;
  phase(): SimPhase;
  /** when its model finished (or will finish) loading, ms since epoch; null before it listens */
  loadedAt(): number | null;
  /** `refuse` resolves once the port is closed; any other mode re-opens a refused port first */
  setFault(fault: Fault | FaultMode): Promise<void>;
  /** stops listening and destroys every open connection */
  close(): Promise<void>;
}
