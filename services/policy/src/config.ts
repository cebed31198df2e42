import { pieces, type Env } from '@herald/config';

export function readConfig(env: Env) {
  return {
    ...pieces.database(env),
    ...pieces.grpcServer(env, 50055),
    ...pieces.shutdown(env),
    /** Preparsed workspace policies kept per replica (least recently used are dropped). */
    policyCacheSize: env.integer('POLICY_CACHE_SIZE', 10_000, { min: 1, max: 1_000_000 }),
  };
}

export type PolicyConfig = ReturnType<typeof readConfig>;
