// Counts the TCP sockets a process holds open, so tests can prove that nothing leaks.
//
// How: every open socket of a process is a file descriptor whose link reads `socket:[INODE]` in /proc/PID/fd;
// /proc/PID/net/tcp and tcp6 list every TCP socket of the process's network namespace with its inode, addresses
// and state. The sockets of PID are the rows whose inode is one of its descriptors. Sockets in TIME_WAIT belong
// to no process any more (inode 0), so they are never counted: only what the process still holds.
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { eventually } from './within.js';

/** /proc/net/tcp state codes (include/net/tcp_states.h). */
const STATES: Record<string, string> = {
  '01': 'ESTABLISHED',
  '02': 'SYN_SENT',
  '03': 'SYN_RECV',
  '04': 'FIN_WAIT1',
  '05': 'FIN_WAIT2',
  '06': 'TIME_WAIT',
  '07': 'CLOSE',
  '08': 'CLOSE_WAIT',
  '09': 'LAST_ACK',
  '0A': 'LISTEN',
  '0B': 'CLOSING',
  '0C': 'NEW_SYN_RECV',
};

export interface TcpSocket {
  readonly localAddress: string;
  readonly localPort: number;
  readonly remoteAddress: string;
  readonly remotePort: number;
  /** ESTABLISHED, LISTEN, CLOSE_WAIT, ... */
  readonly state: string;
  /** bytes that arrived and that the process has not read yet */
  readonly rxQueue: number;
  readonly inode: number;
}

/** /proc/net/tcp stores an IPv4 address as one little-endian 32-bit word in hex. */
function ipv4(hex: string): string {
  const n = Number.parseInt(hex, 16);
  return [n & 0xff, (n >>> 8) & 0xff, (n >>> 16) & 0xff, n >>> 24].join('.');
}

/** tcp6: four little-endian 32-bit words; IPv4-mapped addresses are shown as plain IPv4. */
function ipv6(hex: string): string {
  const bytes: number[] = [];
  for (let w = 0; w < 4; w++) {
    const word = hex.slice(w * 8, w * 8 + 8);
    for (let b = 3; b >= 0; b--) bytes.push(Number.parseInt(word.slice(b * 2, b * 2 + 2), 16));
  }
  if (bytes.slice(0, 10).every((b) => b === 0) && bytes[10] === 0xff && bytes[11] === 0xff) return bytes.slice(12).join('.');
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push((((bytes[i] as number) << 8) | (bytes[i + 1] as number)).toString(16));
  return groups.join(':');
}

function parseTable(text: string, v6: boolean): TcpSocket[] {
  const out: TcpSocket[] = [];
  for (const line of text.split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length < 10) continue;
    const [local, remote, st, queues, inode] = [f[1] as string, f[2] as string, f[3] as string, f[4] as string, f[9] as string];
    const [la, lp] = local.split(':') as [string, string];
    const [ra, rp] = remote.split(':') as [string, string];
    out.push({
      localAddress: v6 ? ipv6(la) : ipv4(la),
      localPort: Number.parseInt(lp, 16),
      remoteAddress: v6 ? ipv6(ra) : ipv4(ra),
      remotePort: Number.parseInt(rp, 16),
      state: STATES[st.toUpperCase()] ?? st,
      rxQueue: Number.parseInt(queues.split(':')[1] ?? '0', 16),
      inode: Number(inode),
    });
  }
  return out;
}

function readOr(path: string, fallback: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return fallback;
  }
}

/** The inodes of the sockets among the process's file descriptors. */
function socketInodes(pid: number): Set<number> {
  const inodes = new Set<number>();
  const dir = `/proc/${pid}/fd`;
  for (const fd of readdirSync(dir)) {
    let link: string;
    try {
      link = readlinkSync(`${dir}/${fd}`);
    } catch {
      continue; // closed between readdir and readlink
    }
    const m = /^socket:\[(\d+)\]$/.exec(link);
    if (m) inodes.add(Number(m[1]));
  }
  return inodes;
}

/** Every TCP socket (IPv4 and IPv6, any state but TIME_WAIT) that the process holds open right now. */
export function tcpSockets(pid: number): TcpSocket[] {
  const inodes = socketInodes(pid);
  const rows = [...parseTable(readOr(`/proc/${pid}/net/tcp`, ''), false), ...parseTable(readOr(`/proc/${pid}/net/tcp6`, ''), true)];
  return rows.filter((s) => s.inode !== 0 && inodes.has(s.inode));
}

/** The process's TCP connections (listening sockets left out), grouped for assertions. */
export interface SocketCensus {
  /** connections accepted on `listenPort` (clients talking to the process) */
  readonly inbound: TcpSocket[];
  /** connections the process opened, by remote port */
  readonly outbound: Map<number, TcpSocket[]>;
  /** connections whose peer has closed but the process has not: the classic leak */
  readonly closeWait: TcpSocket[];
  readonly listening: TcpSocket[];
}

export function socketCensus(pid: number, listenPort: number): SocketCensus {
  const all = tcpSockets(pid);
  const outbound = new Map<number, TcpSocket[]>();
  const inbound: TcpSocket[] = [];
  const listening: TcpSocket[] = [];
  for (const s of all) {
    if (s.state === 'LISTEN') listening.push(s);
    else if (s.localPort === listenPort) inbound.push(s);
    else outbound.set(s.remotePort, [...(outbound.get(s.remotePort) ?? []), s]);
  }
  return { inbound, outbound, closeWait: all.filter((s) => s.state === 'CLOSE_WAIT'), listening };
}

/**
 * The server's accepted connections (from `socketCensus(pid, listenPort)`) whose client, this test process, no longer
 * holds the other end: a connection the server kept after its client went away is a leak, even in ESTABLISHED state.
 */
export function orphanedInbound(census: SocketCensus, listenPort: number): TcpSocket[] {
  const mine = new Set(
    tcpSockets(process.pid)
      .filter((s) => s.remotePort === listenPort && s.state === 'ESTABLISHED')
      .map((s) => s.localPort),
  );
  return census.inbound.filter((s) => !mine.has(s.remotePort));
}

/** A one-line summary for assertion messages. */
export function describeSockets(sockets: readonly TcpSocket[]): string {
  return sockets.map((s) => `${s.localAddress}:${s.localPort}->${s.remoteAddress}:${s.remotePort} ${s.state}`).join(', ') || 'none';
}

/**
 * Resolves once the server process `pid` has accepted the connection from our `clientPort` to its `listenPort` and read
 * everything sent on it so far (its receive queue is empty): what is written next reaches it in another read, and what
 * was written is in its hands, however busy the machine.
 */
export async function readByServer(pid: number, listenPort: number, clientPort: number, timeoutMs = 10_000): Promise<void> {
  await eventually(
    `the server on port ${listenPort} to read what was sent from port ${clientPort}`,
    () => tcpSockets(pid).find((s) => s.localPort === listenPort && s.remotePort === clientPort) ?? 'not accepted yet',
    (mine) => mine !== 'not accepted yet' && mine.rxQueue === 0,
    timeoutMs,
    10,
  );
}
