// A URL's host as an address and back: URL.hostname keeps an IPv6 address in brackets ("[::1]"), which a socket's
// connect(), a bootstrap address and net.isIP() take bare; host:port and URLs need them.

/** "[::1]" -> "::1"; anything else unchanged. */
export function unbracketHost(hostname: string): string {
  return hostname.startsWith('[') ? hostname.slice(1, -1) : hostname;
}

/** "::1" -> "[::1]" (an IPv6 address, for host:port or a URL); anything else unchanged. */
export function bracketHost(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}
