// Replaces the value of the top-level "model" field in a JSON body, leaving every other byte as the client sent it.
// Used for aliases, and for LoRA adapters of engines that name them otherwise (SGLang's BASE:ADAPTER); the body has already been validated by JSON.parse (src/router/proxy/json-members.ts scans it).
import { editMembers } from './json-members.js';

/** Returns the body with the last top-level "model" value replaced (JSON.parse keeps the last duplicate too). */
export function rewriteModel(body: Buffer, model: string): Buffer {
  return editMembers(body, [{ key: 'model', value: JSON.stringify(model), ifPresent: true }]);
}
