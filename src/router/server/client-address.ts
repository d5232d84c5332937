// Who a request's client is, for the per-client rate limit: its authenticated API key when keys are configured,
// else its address. The address is the socket's peer unless that peer is a trusted proxy (--trusted-proxies): then
// X-Forwarded-For names it, read from the right (each proxy appends the address it received from), skipping trusted
// proxies; the right-most untrusted address is the client, since anything left of it may be made up by that client.
import { BlockList, isIP } from 'node:net';
import type { Cidr } from '../config/config.js';
import type { InboundRequest } from '../core/exchange.js';
import { presentedKey } from './auth.js';

/** an address longer than this is no address: it is cut, so a made-up header cannot grow a bucket's key */
const MAX_ADDRESS_CHARS = 64;

/** "1.2.3.4", "1.2.3.4:80", "[::1]:80", "::1" -> the bare address; undefined when it is none */
function bareAddress(entry: string): string | undefined {
  const s = entry.trim();
  if (isIP(s)) return s;
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(s);
  if (bracketed && isIP(bracketed[1] as string)) return bracketed[1];
  const withPort = /^([0-9.]+):\d+$/.exec(s);
  if (withPort && isIP(withPort[1] as string) === 4) return withPort[1];
  return undefined;
}

export class ClientIdentity {
  private readonly trusted: BlockList | undefined;

  constructor(
    trustedProxies: readonly Cidr[],
    /** true when API keys are configured: the gate has checked the key a request presents */
    private readonly keysEnabled: () => boolean,
  ) {
    if (trustedProxies.length > 0) {
      this.trusted = new BlockList();
      for (const c of trustedProxies) this.trusted.addSubnet(c.address, c.prefix, c.family);
    }
  }

  /** The rate-limit bucket's name for a request. */
  bucketKey(req: InboundRequest): string {
    if (this.keysEnabled()) {
      // the API-key gate ran before: a key presented here is one of the configured keys
      const key = presentedKey(req.headers);
      if (key !== undefined) return `key:${key}`;
    }
    return `addr:${this.address(req)}`;
  }

  /** The client's address: the peer's, or, from a trusted proxy, the right-most untrusted X-Forwarded-For entry. */
  address(req: InboundRequest): string {
    const peer = req.socket.remoteAddress ?? '';
    if (!this.trusted || !this.isTrusted(peer)) return peer;
    const header = req.headers['x-forwarded-for'];
    const value = Array.isArray(header) ? header.join(',') : header;
    if (!value) return peer;
    const entries = value.split(',');
    let leftmost = peer;
    for (let i = entries.length - 1; i >= 0; i--) {
      const raw = (entries[i] as string).trim();
      if (raw === '') continue;
      const address = bareAddress(raw);
      // not an address: whatever put it there is not a proxy we trust to name clients; it is the client's word
      if (address === undefined) return raw.slice(0, MAX_ADDRESS_CHARS);
      if (!this.isTrusted(address)) return address;
      leftmost = address;
    }
    // every hop trusted: the left-most is the client
    return leftmost;
  }

  private isTrusted(address: string): boolean {
    const family = isIP(address);
    if (family === 0 || !this.trusted) return false;
    return this.trusted.check(address, family === 4 ? 'ipv4' : 'ipv6');
  }
}
