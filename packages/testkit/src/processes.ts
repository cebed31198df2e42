import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';

/** Starting Herald's real processes for a test, each on free ports, and stopping them. */

export const repoRoot = fileURLToPath(new URL('../../../../', import.meta.url));

export function requiredEnv(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run the tests with "npm test", which starts the infrastructure`);
  return value;
}

export function infrastructureEnv(): Record<string, string> {
  return {
    DATABASE_URL: requiredEnv('DATABASE_URL'),
    REDIS_URL: requiredEnv('REDIS_URL'),
    KAFKA_BROKERS: requiredEnv('KAFKA_BROKERS'),
  };
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

export interface RunningProcess {
  child: ChildProcess;
  /** Everything the process printed so far. */
  output(): string;
  /** Resolves with the exit code (or signal name) once the process has ended. */
  exited: Promise<number | string>;
  /** SIGTERM (or `signal`), then waits for the exit. */
  stop(signal?: NodeJS.Signals): Promise<number | string>;
}

export async function startProcess(
  name: string,
  entry: string,
  env: Record<string, string>,
  ready: RegExp,
  timeoutMs = 20_000,
): Promise<RunningProcess> {
  const child = spawn(process.execPath, ['--import', '@herald/telemetry/register', entry], {
    cwd: repoRoot,
    env: { ...process.env, LOG_LEVEL: 'info', HERALD_SERVICE: name, OTEL_SERVICE_NAME: `herald-${name}`, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const exited = new Promise<number | string>((resolve) => child.on('exit', (code, signal) => resolve(signal ?? code ?? -1)));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not become ready in ${timeoutMs} ms:\n${output}`)), timeoutMs);
    const onData = (chunk: Buffer): void => {
      output += chunk.toString();
      if (ready.test(output)) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited (${code}) before it was ready:\n${output}`));
    });
  }).catch(async (err: unknown) => {
    child.kill('SIGKILL');
    throw err;
  });
  return {
    child,
    output: () => output,
    exited,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}

export interface Stack {
  gatewayUrls: string[];
  gatewayUrl: string;
  gateways: RunningProcess[];
  services: RunningProcess[];
  /** Starts one more gateway on these services, with extra environment; returns its URL. */
  addGateway(env?: Record<string, string>): Promise<string>;
  stop(): Promise<void>;
}

export interface StackOptions {
  gateways?: number;
  gatewayEnv?: Record<string, string>;
  /** Extra environment for every process of the stack, services and gateways. */
  env?: Record<string, string>;
}

/** Account and audience services plus N gateways, on the real infrastructure. */
export async function startStack({ gateways = 1, gatewayEnv = {}, env = {} }: StackOptions = {}): Promise<Stack> {
  const infra = { ...infrastructureEnv(), ...env };
  const [accountPort, audiencePort] = [await freePort(), await freePort()];
  const services = await Promise.all([
    startProcess('account', 'services/account/dist/src/main.js', { ...infra, GRPC_PORT: String(accountPort) }, /account service serving/),
    startProcess('audience', 'services/audience/dist/src/main.js', { ...infra, GRPC_PORT: String(audiencePort) }, /audience service serving/),
  ]);
  const gatewayProcesses: RunningProcess[] = [];
  const addGateway = async (env: Record<string, string> = {}): Promise<string> => {
    const port = await freePort();
    gatewayProcesses.push(
      await startProcess(
        'gateway',
        'gateway/dist/src/main.js',
        {
          ...infra,
          PORT: String(port),
          ACCOUNT_GRPC_URL: `127.0.0.1:${accountPort}`,
          AUDIENCE_GRPC_URL: `127.0.0.1:${audiencePort}`,
          ...env,
        },
        /Server listening/,
      ),
    );
    return `http://127.0.0.1:${port}`;
  };
  const gatewayUrls: string[] = [];
  for (let index = 0; index < gateways; index += 1) gatewayUrls.push(await addGateway(gatewayEnv));
  return {
    gatewayUrls,
    gatewayUrl: gatewayUrls[0] as string,
    gateways: gatewayProcesses,
    services,
    addGateway,
    async stop() {
      await Promise.all(gatewayProcesses.map((gateway) => gateway.stop()));
      await Promise.all(services.map((service) => service.stop()));
    },
  };
}
