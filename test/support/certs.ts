// Certificates for TLS tests, made with openssl (EC keys: milliseconds each): a CA and certificates it signs. Suites
// that use it skip through requireTool('openssl') where openssl is missing.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const EC_KEY = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

export interface Pem {
  readonly certFile: string;
  readonly keyFile: string;
  readonly cert: string;
  readonly key: string;
}

export interface TestCa {
  readonly dir: string;
  readonly caFile: string;
  readonly ca: string;
  /** a certificate for `cn` signed by the CA, with one X.509 v3 extension line (subjectAltName=..., extendedKeyUsage=...) */
  sign(name: string, cn: string, extension: string): Pem;
  /** removes the directory and everything in it */
  remove(): void;
}

export function testCa(prefix = 'test-ca-'): TestCa {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  const ssl = (...args: string[]): void => void execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
  const file = (name: string): string => path.join(dir, name);
  ssl('req', '-x509', ...EC_KEY, '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '1', '-subj', '/CN=test-ca');
  return {
    dir,
    caFile: file('ca.crt'),
    ca: readFileSync(file('ca.crt'), 'utf8'),
    sign(name, cn, extension) {
      writeFileSync(file(`${name}.ext`), `${extension}\n`);
      ssl('req', ...EC_KEY, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${cn}`);
      ssl(
        'x509',
        '-req',
        '-in',
        `${name}.csr`,
        '-CA',
        'ca.crt',
        '-CAkey',
        'ca.key',
        '-CAcreateserial',
        '-out',
        `${name}.crt`,
        '-days',
        '1',
        '-extfile',
        `${name}.ext`,
      );
      return {
        certFile: file(`${name}.crt`),
        keyFile: file(`${name}.key`),
        cert: readFileSync(file(`${name}.crt`), 'utf8'),
        key: readFileSync(file(`${name}.key`), 'utf8'),
      };
    },
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
