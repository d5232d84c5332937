// How long a prompt is, in characters, up to a limit: enough to tell a prompt too short to be worth a prefill hop
// (--pd-min-prompt-chars) without reading a long one to its end.

function contentChars(content: unknown, limit: number): number {
  if (typeof content === 'string') return content.length;
  if (!Array.isArray(content)) return 0;
  let n = 0;
  for (const part of content as unknown[]) {
    if (n >= limit) break;
    if (typeof part === 'string') n += part.length;
    else if (typeof part === 'object' && part !== null && typeof (part as { text?: unknown }).text === 'string')
      n += (part as { text: string }).text.length;
    else if (typeof part === 'number') n += 1;
  }
  return n;
}

/** Characters of the chat messages' contents, or of `prompt` / `input`, counted until `limit` is reached. */
export function promptChars(body: Readonly<Record<string, unknown>>, limit: number): number {
  let n = 0;
  if (Array.isArray(body.messages)) {
    for (const m of body.messages as unknown[]) {
      if (n >= limit) return n;
      if (typeof m === 'object' && m !== null) n += contentChars((m as { content?: unknown }).content, limit - n);
    }
    return n;
  }
  return contentChars(body.prompt ?? body.input, limit);
}
