import { pieces, type Env } from '@herald/config';

export function readConfig(env: Env) {
  return {
    ...pieces.database(env),
    ...pieces.namespace(env),
    ...pieces.kafka(env),
    ...pieces.grpcServer(env, 50052),
    ...pieces.shutdown(env),
  };
}

export type AudienceConfig = ReturnType<typeof readConfig>;
