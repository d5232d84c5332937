// nginx as the reference proxy: keep-alive to the upstream, no response buffering (SSE flows through as it comes).
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { startProc, type Proc } from './procs.js';

export interface NginxOptions {
  readonly dir: string;
  readonly port: number;
  readonly upstreamPort: number;
  readonly workers: number;
  readonly accessLog: boolean;
}

export function nginxConfig(o: NginxOptions): string {
  const tmp = (name: string): string => path.join(o.dir, name);
  return `# written by bench/nginx.ts
${process.getuid?.() === 0 ? 'user root root;' : ''}
worker_processes ${o.workers};
daemon off;
master_process on;
pid ${tmp('nginx.pid')};
error_log ${tmp('nginx-error.log')} warn;
worker_rlimit_nofile 20000;
events { worker_connections 8192; multi_accept on; }
http {
  access_log ${o.accessLog ? `${tmp('nginx-access.log')} combined` : 'off'};
  client_body_temp_path ${tmp('client_body')};
  proxy_temp_path ${tmp('proxy')};
  fastcgi_temp_path ${tmp('fastcgi')};
  uwsgi_temp_path ${tmp('uwsgi')};
  scgi_temp_path ${tmp('scgi')};
  keepalive_requests 1000000;
  keepalive_timeout 65s;
  upstream engine {
    server 127.0.0.1:${o.upstreamPort};
    keepalive 256;
    keepalive_requests 1000000;
  }
  server {
    listen 127.0.0.1:${o.port} backlog=4096;
    location / {
      proxy_pass http://engine;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_read_timeout 300s;
    }
  }
}
`;
}

export function startNginx(o: NginxOptions): Proc {
  const file = path.join(o.dir, `nginx-${o.workers}w${o.accessLog ? '-log' : ''}.conf`);
  mkdirSync(o.dir, { recursive: true });
  writeFileSync(file, nginxConfig(o));
  // SIGQUIT: graceful stop of the master and its workers
  return startProc(
    `nginx(${o.workers}w)`,
    'nginx',
    ['-e', path.join(o.dir, 'nginx-error.log'), '-c', file, '-p', o.dir],
    path.join(o.dir, 'nginx.out'),
    'SIGTERM',
  );
}
