/**
 * The `Env` parser collects every problem and reports them in one ConfigError, so an operator fixes
 * a bad deployment in one go; `loadConfig` turns that into exit code 78 (EX_CONFIG) before a
 * service touches anything.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { ConfigError, Env, loadConfig, pieces } from '../src/index.js';

const repoRoot = fileURLToPath(new URL('../../../../', import.meta.url));

/** Runs `fn`, expects a ConfigError, and returns its problems. */
function problemsOf(fn: () => void): string[] {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof ConfigError, `expected a ConfigError, got ${String(err)}`);
    return err.problems;
  }
  assert.fail('expected a ConfigError');
}

test('every problem is collected, named, and reported in one ConfigError', () => {
  const env = new Env({
    PORT: 'abc',
    WORKERS: '12.5',
    POOL: '500',
    DEBUG: 'yes',
    MODE: 'fast',
    DATABASE_URL: 'mysql://db:3306/x',
    REDIS_URL: 'not a url',
  });
  // Each parser still returns something usable, so reading carries on to find the next problem.
  assert.equal(env.string('SECRET_NAME'), '');
  assert.equal(env.port('PORT'), 0);
  assert.equal(env.integer('WORKERS', 4), 4);
  assert.equal(env.integer('POOL', 10, { min: 1, max: 200 }), 10);
  assert.equal(env.boolean('DEBUG'), false);
  assert.equal(env.oneOf('MODE', ['safe', 'slow'] as const), 'safe');
  assert.equal(env.url('DATABASE_URL', ['postgres:', 'postgresql:']), 'mysql://db:3306/x');
  assert.equal(env.url('REDIS_URL', ['redis:']), 'not a url');
  assert.deepEqual(env.list('KAFKA_BROKERS'), []);
  assert.equal(env.integer('TIMEOUT_MS'), 0);

  const problems = problemsOf(() => env.done());
  assert.deepEqual(problems, [
    'SECRET_NAME is required but not set',
    'PORT must be an integer between 0 and 65535, got "abc"',
    `WORKERS must be an integer between ${Number.MIN_SAFE_INTEGER} and ${Number.MAX_SAFE_INTEGER}, got "12.5"`,
    'POOL must be an integer between 1 and 200, got "500"',
    'DEBUG must be true or false, got "yes"',
    'MODE must be one of safe, slow, got "fast"',
    'DATABASE_URL must use postgres: or postgresql:, got "mysql:"',
    'REDIS_URL must be a URL',
    'KAFKA_BROKERS is required but not set',
    'TIMEOUT_MS is required but not set',
  ]);
  // One message, one line per problem.
  assert.throws(() => env.done(), { name: 'ConfigError', message: `Invalid configuration:\n  - ${problems.join('\n  - ')}` });
});

test('valid values parse; blank counts as unset; fallbacks apply only when unset', () => {
  const env = new Env({
    NAME: '  herald  ',
    BLANK: '   ',
    PORT: '8080',
    LOW: '0',
    HIGH: '65535',
    NEGATIVE: '-5',
    ON: 'true',
    OFF: '0',
    ONE: '1',
    NO: 'false',
    MODE: 'slow',
    DATABASE_URL: 'postgresql://u:p@localhost:5432/herald',
    BROKERS: ' kafka-1:9092, kafka-2:9092 ,,kafka-3:9092, ',
  });
  assert.equal(env.string('NAME'), 'herald');
  assert.equal(env.string('BLANK', 'fallback'), 'fallback');
  assert.equal(env.optionalString('BLANK'), undefined);
  assert.equal(env.optionalString('UNSET'), undefined);
  assert.equal(env.optionalString('NAME'), 'herald');
  assert.equal(env.port('PORT', 1), 8080);
  assert.equal(env.port('LOW'), 0);
  assert.equal(env.port('HIGH'), 65535);
  assert.equal(env.port('UNSET_PORT', 50051), 50051);
  assert.equal(env.integer('NEGATIVE', undefined, { min: -10, max: 10 }), -5);
  assert.deepEqual(
    [env.boolean('ON'), env.boolean('OFF'), env.boolean('ONE'), env.boolean('NO'), env.boolean('UNSET_BOOL', true)],
    [true, false, true, false, true],
  );
  assert.equal(env.oneOf('MODE', ['safe', 'slow'] as const), 'slow');
  assert.equal(env.oneOf('UNSET_MODE', ['safe', 'slow'] as const, 'slow'), 'slow');
  assert.equal(env.url('DATABASE_URL', ['postgres:', 'postgresql:']), 'postgresql://u:p@localhost:5432/herald');
  assert.equal(env.url('UNSET_URL', ['http:', 'https:'], 'http://localhost:8080'), 'http://localhost:8080');
  assert.deepEqual(env.list('BROKERS'), ['kafka-1:9092', 'kafka-2:9092', 'kafka-3:9092']);
  assert.deepEqual(env.list('UNSET_LIST', ['a']), ['a']);
  assert.doesNotThrow(() => env.done());
});

test('boundaries and fallbacks are checked too', () => {
  const env = new Env({ PORT_OVER: '65536', PORT_NEGATIVE: '-1', BROKERS: ' , ,' });
  assert.equal(env.port('PORT_OVER', 80), 80);
  assert.equal(env.port('PORT_NEGATIVE'), 0);
  // A fallback is a default, not a pass: it must satisfy the same rules.
  env.url('PUBLIC_ORIGIN', ['https:'], 'http://localhost:8080');
  // A required list with no items in it is as good as unset.
  assert.deepEqual(env.list('BROKERS'), []);
  assert.deepEqual(problemsOf(() => env.done()), [
    'PORT_OVER must be an integer between 0 and 65535, got "65536"',
    'PORT_NEGATIVE must be an integer between 0 and 65535, got "-1"',
    'PUBLIC_ORIGIN must use https:, got "http:"',
    'BROKERS is required but not set',
  ]);
});

test('the shared pieces name the variables every service uses', () => {
  const env = new Env({ REDIS_URL: 'rediss://cache:6380', KAFKA_BROKERS: 'k1:9092,k2:9092', GRPC_PORT: '6000', DATABASE_POOL_SIZE: '0', HERALD_NAMESPACE: 'Staging/1' });
  const config = {
    ...pieces.namespace(env),
    ...pieces.database(env),
    ...pieces.redis(env),
    ...pieces.kafka(env),
    ...pieces.grpcServer(env, 50051),
    ...pieces.shutdown(env),
  };
  assert.deepEqual(config, {
    namespace: '',
    databaseUrl: '',
    databasePoolSize: 10,
    redisUrl: 'rediss://cache:6380',
    kafkaBrokers: ['k1:9092', 'k2:9092'],
    kafkaClientId: 'herald',
    kafkaSessionTimeoutMs: 30_000,
    grpcHost: '127.0.0.1',
    grpcPort: 6000,
    shutdownGraceMs: 10_000,
  });
  assert.deepEqual(problemsOf(() => env.done()), [
    'HERALD_NAMESPACE must be at most 64 lower-case letters, digits, ".", "_" or "-", got "Staging/1"',
    'DATABASE_URL is required but not set',
    'DATABASE_POOL_SIZE must be an integer between 1 and 200, got "0"',
  ]);
});

test('loadConfig returns the configuration when it is valid', () => {
  const config = loadConfig((env) => ({ port: env.port('PORT'), debug: env.boolean('DEBUG', false) }), { PORT: '9000' });
  assert.deepEqual(config, { port: 9000, debug: false });
});

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Runs node with exactly `env` (nothing inherited), killing it if it outlives `timeoutMs`. */
function runNode(args: string[], env: Record<string, string>, timeoutMs = 15_000): Promise<Exit> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { cwd: repoRoot, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`node ${args.join(' ')} still running after ${timeoutMs} ms:\n${stdout}${stderr}`));
    }, timeoutMs);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

test('a service with a bad configuration exits 78 at start, naming every problem', { timeout: 20_000 }, async () => {
  // No DATABASE_URL, a non-numeric GRPC_PORT; everything else the account service needs is fine.
  const result = await runNode(['services/account/dist/src/main.js'], {
    PATH: process.env.PATH ?? '',
    GRPC_PORT: 'abc',
    KAFKA_BROKERS: '127.0.0.1:9092',
  });
  assert.deepEqual(
    { code: result.code, signal: result.signal, stdout: result.stdout },
    { code: 78, signal: null, stdout: '' },
    `stderr:\n${result.stderr}`,
  );
  assert.equal(
    result.stderr,
    [
      'Invalid configuration:',
      '  - DATABASE_URL is required but not set',
      '  - GRPC_PORT must be an integer between 0 and 65535, got "abc"',
      '',
    ].join('\n'),
  );
});
