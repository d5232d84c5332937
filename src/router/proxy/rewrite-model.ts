// Replaces the value of the top-level "model" field in a JSON body, leaving every other byte as the client sent it.
// Used only for aliases; the body has already been validated by JSON.parse. The scan reads the bytes as latin1
// (one char per byte: JSON's structure is ASCII, and UTF-8 continuation bytes never look like '"' or '\\'),
// so string offsets are byte offsets and the splice keeps every other byte, even invalid UTF-8.

/** Index just past the JSON string starting at `start` (which is a quote). */
function skipString(text: string, start: number): number {
  let i = start + 1;
  while (i < text.length) {
    const c = text.charCodeAt(i);
    if (c === 0x5c) i += 2;
    else if (c === 0x22) return i + 1;
    else i++;
  }
  return i;
}

/** Returns the body with the last top-level "model" value replaced (JSON.parse keeps the last duplicate too). */
export function rewriteModel(body: Buffer, model: string): Buffer {
  const text = body.toString('latin1');
  let depth = 0;
  let valueStart = -1;
  let valueEnd = -1;
  let expectingKey = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      const end = skipString(text, i);
      if (depth === 1 && expectingKey) {
        const raw = text.slice(i, end);
        const key = raw.includes('\\') ? (JSON.parse(Buffer.from(raw, 'latin1').toString('utf8')) as string) : raw.slice(1, -1);
        let j = end;
        while (j < text.length && text[j] !== ':') j++;
        j++;
        while (j < text.length && /\s/.test(text[j] as string)) j++;
        if (key === 'model' && text[j] === '"') {
          valueStart = j;
          valueEnd = skipString(text, j);
        }
        expectingKey = false;
        i = j - 1;
        continue;
      }
      i = end - 1;
    } else if (c === 0x7b || c === 0x5b) {
      depth++;
      expectingKey = depth === 1 && c === 0x7b;
    } else if (c === 0x7d || c === 0x5d) {
      depth--;
    } else if (c === 0x2c && depth === 1) {
      expectingKey = true;
    }
  }
  if (valueStart < 0) return body;
  return Buffer.concat([body.subarray(0, valueStart), Buffer.from(JSON.stringify(model), 'utf8'), body.subarray(valueEnd)]);
}
