/** What test processes need from the environment the tests run in. */

/** The repository's root (the component registry's), where tests start processes from. */
export { repositoryRoot as repoRoot } from '@herald/components';

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
