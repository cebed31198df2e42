/**
 * Environment parsing, done once at start. Every problem is collected, then the process stops
 * with one message naming each bad or missing variable, so an operator fixes them in one go.
 */

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n  - ${problems.join('\n  - ')}`);
    this.name = 'ConfigError';
  }
}

type Source = Record<string, string | undefined>;

export class Env {
  private readonly problems: string[] = [];

  constructor(private readonly source: Source = process.env) {}

  private raw(name: string): string | undefined {
    const value = this.source[name];
    return value === undefined || value.trim() === '' ? undefined : value.trim();
  }

  private missing<T>(name: string, fallback: T | undefined, placeholder: T): T {
    if (fallback !== undefined) return fallback;
    this.problems.push(`${name} is required but not set`);
    return placeholder;
  }

  string(name: string, fallback?: string): string {
    return this.raw(name) ?? this.missing(name, fallback, '');
  }

  /** A string that must match `pattern` (`rule` says how, in the error). */
  matching(name: string, pattern: RegExp, rule: string, fallback?: string): string {
    const value = this.string(name, fallback);
    if (!pattern.test(value)) {
      this.problems.push(`${name} must be ${rule}, got "${value}"`);
      return fallback ?? '';
    }
    return value;
  }

  /** A secret that must match `pattern`: like `matching`, but a bad value is never echoed in the error. */
  secretMatching(name: string, pattern: RegExp, rule: string, fallback?: string): string {
    const value = this.string(name, fallback);
    if (!pattern.test(value)) {
      this.problems.push(`${name} must be ${rule} (its value is not shown)`);
      return fallback ?? '';
    }
    return value;
  }

  optionalString(name: string): string | undefined {
    return this.raw(name);
  }

  integer(name: string, fallback?: number, bounds: { min?: number; max?: number } = {}): number {
    const value = this.raw(name);
    if (value === undefined) return this.missing(name, fallback, 0);
    const parsed = Number(value);
    const { min = Number.MIN_SAFE_INTEGER, max = Number.MAX_SAFE_INTEGER } = bounds;
    if (!Number.isInteger(parsed) || parsed < min || parsed > max) {
      this.problems.push(`${name} must be an integer between ${min} and ${max}, got "${value}"`);
      return fallback ?? 0;
    }
    return parsed;
  }

  port(name: string, fallback?: number): number {
    return this.integer(name, fallback, { min: 0, max: 65535 });
  }

  boolean(name: string, fallback?: boolean): boolean {
    const value = this.raw(name);
    if (value === undefined) return this.missing(name, fallback, false);
    if (value === 'true' || value === '1') return true;
    if (value === 'false' || value === '0') return false;
    this.problems.push(`${name} must be true or false, got "${value}"`);
    return fallback ?? false;
  }

  oneOf<T extends string>(name: string, allowed: readonly T[], fallback?: T): T {
    const value = this.raw(name);
    if (value === undefined) return this.missing(name, fallback, allowed[0] as T);
    if (!(allowed as readonly string[]).includes(value)) {
      this.problems.push(`${name} must be one of ${allowed.join(', ')}, got "${value}"`);
      return fallback ?? (allowed[0] as T);
    }
    return value as T;
  }

  url(name: string, protocols: readonly string[], fallback?: string): string {
    const value = this.raw(name) ?? this.missing(name, fallback, '');
    if (value === '') return value;
    try {
      const parsed = new URL(value);
      if (!protocols.includes(parsed.protocol)) {
        this.problems.push(`${name} must use ${protocols.join(' or ')}, got "${parsed.protocol}"`);
      }
    } catch {
      this.problems.push(`${name} must be a URL`);
    }
    return value;
  }

  /**
   * A value of a shape of its own, read by `parse`, which throws an Error saying what the value must
   * be ("must be ..."); unset is `fallback`.
   */
  parsed<T>(name: string, parse: (value: string) => T, fallback: T): T {
    const value = this.raw(name);
    if (value === undefined) return fallback;
    try {
      return parse(value);
    } catch (err) {
      this.problems.push(`${name} ${err instanceof Error ? err.message : String(err)}, got "${value}"`);
      return fallback;
    }
  }

  /** Comma-separated list, e.g. KAFKA_BROKERS=host1:9092,host2:9092. */
  list(name: string, fallback?: string[]): string[] {
    const items = (this.raw(name) ?? '').split(',').map((item) => item.trim()).filter((item) => item !== '');
    // A list of nothing (e.g. " , ") is as unset as a blank value.
    return items.length > 0 ? items : this.missing(name, fallback, []);
  }

  /** Throws one ConfigError naming every problem seen so far. */
  done(): void {
    if (this.problems.length > 0) throw new ConfigError(this.problems);
  }
}

/** Parses with `read`, and on a ConfigError prints it and exits: the fail-fast entry point. */
export function loadConfig<T>(read: (env: Env) => T, source: Source = process.env): T {
  const env = new Env(source);
  const config = read(env);
  try {
    env.done();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(78); // EX_CONFIG
    }
    throw err;
  }
  return config;
}

/** Shared pieces, so every service spells the same variables the same way. */
export const pieces = {
  database: (env: Env) => ({
    databaseUrl: env.url('DATABASE_URL', ['postgres:', 'postgresql:']),
    databasePoolSize: env.integer('DATABASE_POOL_SIZE', 10, { min: 1, max: 200 }),
  }),
  redis: (env: Env) => ({
    redisUrl: env.url('REDIS_URL', ['redis:', 'rediss:']),
  }),
  kafka: (env: Env) => ({
    kafkaBrokers: env.list('KAFKA_BROKERS'),
    kafkaClientId: env.string('KAFKA_CLIENT_ID', 'herald'),
    kafkaSessionTimeoutMs: env.integer('KAFKA_SESSION_TIMEOUT_MS', 30_000, { min: 6_000, max: 300_000 }),
  }),
  /**
   * One setting isolates a Herald from others sharing its PostgreSQL, Redis and Kafka (each test
   * stack has its own): it is put before topic and consumer group names, stamped on outbox and
   * work-queue rows, and put in rate-limit keys. Every component reads it; the chart sets it on all.
   */
  namespace: (env: Env) => ({
    namespace: env.matching('HERALD_NAMESPACE', /^[a-z0-9._-]{0,64}$/, 'at most 64 lower-case letters, digits, ".", "_" or "-"', ''),
  }),
  grpcServer: (env: Env, defaultPort: number) => ({
    grpcHost: env.string('GRPC_HOST', '127.0.0.1'),
    grpcPort: env.port('GRPC_PORT', defaultPort),
  }),
  shutdown: (env: Env) => ({
    shutdownGraceMs: env.integer('SHUTDOWN_GRACE_MS', 10_000, { min: 0, max: 120_000 }),
  }),
};

/**
 * Calls `drain` once on SIGTERM or SIGINT, then exits: 0 when the drain finished, 1 when it threw
 * or overran `graceMs` (the orchestrator's own kill deadline should be a little longer).
 */
export function drainOnSignal(
  drain: () => Promise<void>,
  graceMs: number,
  report: (message: string, err?: unknown) => void,
): void {
  let draining = false;
  const onSignal = (signal: NodeJS.Signals): void => {
    if (draining) return;
    draining = true;
    report(`${signal} received; draining`);
    const overrun = setTimeout(() => {
      report('drain overran its grace period; exiting');
      process.exit(1);
    }, graceMs + 1_000);
    overrun.unref();
    drain().then(
      () => {
        report('drained; exiting');
        process.exit(0);
      },
      (err: unknown) => {
        report('drain failed', err);
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', onSignal);
  process.once('SIGINT', onSignal);
}
