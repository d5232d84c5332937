// HTTP token characters (tchar, RFC 9110 section 5.6.2): what a method, a header name or a trailer name is made of.
// One table for every reader and writer of heads (the engine client, the fast path, the flags naming a header).

/** TCHAR[byte] is 1 for a token character, else 0 */
export const TCHAR = new Uint8Array(256);
for (const c of "!#$%&'*+-.^_`|~") TCHAR[c.charCodeAt(0)] = 1;
for (let i = 48; i <= 57; i++) TCHAR[i] = 1;
for (let i = 65; i <= 90; i++) TCHAR[i] = 1;
for (let i = 97; i <= 122; i++) TCHAR[i] = 1;

/** Whether `s` is a token: one or more tchar, nothing else. */
export function isHttpToken(s: string): boolean {
  if (s.length === 0) return false;
  for (let i = 0; i < s.length; i++) if (TCHAR[s.charCodeAt(i)] !== 1) return false;
  return true;
}
