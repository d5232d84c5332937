// Listening on a port, with the failures an operator can fix said in one line that names the setting.
import { once } from 'node:events';
import type { Server } from 'node:net';
import { StartupError } from '../core/startup-error.js';

/** What sets the port, for the message: e.g. `--port` / `LLM_ROUTER_PORT`. */
export interface PortSetting {
  readonly flag: string;
  readonly env: string;
}

/** The message for a listen error the operator can fix, else undefined. */
export function listenFailure(err: unknown, host: string, port: number, setting: PortSetting): StartupError | undefined {
  const code = (err as { code?: unknown }).code;
  const where = `${host}:${port} (${setting.flag}, env ${setting.env})`;
  if (code === 'EADDRINUSE')
    return new StartupError(`port ${port} is already in use: cannot listen on ${where}; stop the other process or choose another port`);
  if (code === 'EACCES')
    return new StartupError(`no permission to listen on ${where}; ports below 1024 need privileges, choose a higher port`);
  if (code === 'EADDRNOTAVAIL')
    return new StartupError(`address ${host} is not available on this machine: cannot listen on ${where}; check --host`);
  return undefined;
}

export async function listen(server: Server, opts: { host: string; port: number; backlog?: number }, setting: PortSetting): Promise<void> {
  server.listen({ port: opts.port, host: opts.host, ...(opts.backlog ? { backlog: opts.backlog } : {}) });
  try {
    await once(server, 'listening');
  } catch (err) {
    throw listenFailure(err, opts.host, opts.port, setting) ?? err;
  }
}
