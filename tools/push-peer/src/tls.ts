/**
 * A throwaway certificate authority and a server certificate for 127.0.0.1 / ::1 / localhost,
 * made with the `openssl` CLI (keys come from node:crypto). Generated once per process and reused
 * by every peer started in it; valid for 7 days.
 */
import { execFile } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface TlsMaterial {
  /** The server's private key (PEM). */
  readonly key: string;
  /** The server certificate (PEM), issued by `ca`. */
  readonly cert: string;
  /** The CA certificate (PEM) clients should trust. */
  readonly ca: string;
}

const CONFIG = `[req]
distinguished_name = dn
prompt = no
[dn]
CN = Herald push-peer test CA
[ca_ext]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
[leaf_ext]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1,IP:::1,DNS:localhost
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
`;

function p256KeyPem(): string {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  return privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
}

async function generate(): Promise<TlsMaterial> {
  const dir = await mkdtemp(join(tmpdir(), 'herald-push-peer-'));
  try {
    const file = (name: string) => join(dir, name);
    const caKey = p256KeyPem();
    const key = p256KeyPem();
    await Promise.all([writeFile(file('openssl.cnf'), CONFIG), writeFile(file('ca.key'), caKey, { mode: 0o600 }), writeFile(file('leaf.key'), key, { mode: 0o600 })]);
    const openssl = async (args: string[]) => {
      try {
        await run('openssl', args, { cwd: dir, env: { ...process.env, OPENSSL_CONF: file('openssl.cnf') } });
      } catch (err) {
        const detail = err instanceof Error ? err.message : String(err);
        throw new Error(`push-peer: generating the TLS certificate with the openssl CLI failed (pass options.tls = {key, cert} to avoid it): ${detail}`);
      }
    };
    await openssl(['req', '-x509', '-new', '-config', file('openssl.cnf'), '-extensions', 'ca_ext', '-key', file('ca.key'), '-sha256', '-days', '7', '-out', file('ca.pem')]);
    await openssl(['req', '-new', '-config', file('openssl.cnf'), '-key', file('leaf.key'), '-subj', '/CN=127.0.0.1', '-out', file('leaf.csr')]);
    await openssl([
      'x509', '-req', '-in', file('leaf.csr'), '-CA', file('ca.pem'), '-CAkey', file('ca.key'),
      '-set_serial', `0x${randomBytes(16).toString('hex').replace(/^[89a-f]/, '1')}`,
      '-days', '7', '-sha256', '-extfile', file('openssl.cnf'), '-extensions', 'leaf_ext', '-out', file('leaf.pem'),
    ]);
    const [cert, ca] = await Promise.all([readFile(file('leaf.pem'), 'utf8'), readFile(file('ca.pem'), 'utf8')]);
    return { key, cert, ca };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

let cached: Promise<TlsMaterial> | undefined;

/** The process-wide test CA and 127.0.0.1 server certificate (generated on first use). */
export function testTlsMaterial(): Promise<TlsMaterial> {
  cached ??= generate().catch((err: unknown) => {
    cached = undefined;
    throw err;
  });
  return cached;
}
