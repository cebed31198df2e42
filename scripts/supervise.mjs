// Runs every Herald process on this machine: the services on loopback gRPC, then the gateway.
// Ctrl-C (or SIGTERM) drains them all; if one dies, the others are stopped too.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const processes = [
  { name: 'account', entry: 'services/account/dist/src/main.js', env: { GRPC_PORT: '50051' } },
  { name: 'audience', entry: 'services/audience/dist/src/main.js', env: { GRPC_PORT: '50052' } },
  { name: 'campaign', entry: 'services/campaign/dist/src/main.js', env: { GRPC_PORT: '50053' } },
  { name: 'delivery', entry: 'services/delivery/dist/src/main.js', env: { GRPC_PORT: '50054' } },
  { name: 'policy', entry: 'services/policy/dist/src/main.js', env: { GRPC_PORT: '50055' } },
  // Answer links are signed with this secret; a local run makes a new one unless one is set, so
  // links from an earlier run stop working.
  {
    name: 'decision',
    entry: 'services/decision/dist/src/main.js',
    env: { GRPC_PORT: '50056', ANSWER_TOKEN_SECRET: process.env.ANSWER_TOKEN_SECRET ?? randomBytes(32).toString('base64url') },
  },
  // A local run accepts push endpoints on any https host (local push services); production does not.
  {
    name: 'gateway',
    entry: 'gateway/dist/src/main.js',
    env: { PORT: process.env.PORT ?? '8080', ALLOW_ANY_PUSH_SERVICE: process.env.ALLOW_ANY_PUSH_SERVICE ?? 'true' },
  },
];

const children = new Map();
let stopping = false;

function stopAll(code) {
  if (stopping) return;
  stopping = true;
  for (const child of children.values()) child.kill('SIGTERM');
  const exitWhenDone = setInterval(() => {
    if (children.size === 0) {
      clearInterval(exitWhenDone);
      process.exit(code);
    }
  }, 100);
}

for (const { name, entry, env } of processes) {
  const child = spawn(process.execPath, ['--import', '@herald/telemetry/register', entry], {
    cwd: root,
    env: { ...process.env, HERALD_SERVICE: name, OTEL_SERVICE_NAME: `herald-${name}`, ...env },
    stdio: 'inherit',
  });
  children.set(name, child);
  child.on('exit', (code, signal) => {
    children.delete(name);
    if (!stopping) {
      console.error(`${name} exited (${signal ?? code}); stopping the others`);
      stopAll(1);
    }
  });
}

process.on('SIGINT', () => stopAll(0));
process.on('SIGTERM', () => stopAll(0));
