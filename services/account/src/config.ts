import { pieces, type Env } from '@herald/config';

export function readConfig(env: Env) {
  return {
    ...pieces.database(env),
    ...pieces.kafka(env),
    ...pieces.grpcServer(env, 50051),
    ...pieces.shutdown(env),
    /** Where Herald is reached from outside; hosted subscribe pages live under it. */
    publicOrigin: env.url('PUBLIC_ORIGIN', ['http:', 'https:'], 'http://localhost:8080'),
  };
}

export type AccountConfig = ReturnType<typeof readConfig>;
