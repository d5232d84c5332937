// Replaces the value of the top-level "model" field in a JSON body, leaving every other byte as the client sent it.
// Used for aliases, and for LoRA adapters of engines that name them otherwise (SGLang's BASE:ADAPTER); the body has already been validated by JSON.parse (src/router/proxy/json-members.ts scans it).
import { editMembers } from './json-members.js';

/** Returns the body with the last top-level "model" value replaced (JSON.parse keeps the last duplicate too). */
export function rewriteModel(body: Buffer, model: string): Buffer {
  return editMembers(body, [{ key: 'model', value: JSON.stringify(model), ifPresent: true }]);
}

/**
 * A multipart/form-data body with its `model` field's value replaced by `model`; every other byte as it came (the file
 * part included). The body as it came when it has no such field.
 */
export function rewriteMultipartModel(raw: Buffer, boundary: string, model: string): Buffer {
  const delimiter = Buffer.from(`--${boundary}`, 'latin1');
  let pos = raw.indexOf(delimiter);
  while (pos >= 0) {
    const partStart = pos + delimiter.length;
    // the closing delimiter (--boundary--) ends the parts
    if (raw[partStart] === 0x2d && raw[partStart + 1] === 0x2d) break;
    const headersEnd = raw.indexOf('\r\n\r\n', partStart);
    if (headersEnd < 0) break;
    const next = raw.indexOf(Buffer.concat([Buffer.from('\r\n'), delimiter]), headersEnd + 4);
    if (next < 0) break;
    const headers = raw.subarray(partStart, headersEnd).toString('latin1');
    if (/^content-disposition:[^\r\n]*;\s*name="?model"?\s*(;|\r|$)/im.test(headers) && !/filename\*?=/i.test(headers))
      return Buffer.concat([raw.subarray(0, headersEnd + 4), Buffer.from(model, 'utf8'), raw.subarray(next)]);
    pos = next + 2;
  }
  return raw;
}
