import { after, before } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';

import { answerChannel } from '@herald/bus';
import { connectDatabase, requiredEnv, startStack, type Stack } from '@herald/testkit';
import { Redis } from 'ioredis';

/** A stack for /ask and /decisions tests (two gateways, the decision service) and a look at its waiters in Redis. */
export interface QuestionStack {
  readonly stack: Stack;
  /** How many gateways are subscribed for wake-ups of this question (one per replica holding a waiter). */
  subscribers(questionId: string): Promise<number>;
}

/** Starts the stack before the file's tests and stops it after them. */
export function questionStack(): QuestionStack {
  let stack: Stack | undefined;
  let redis: Redis | undefined;
  before(async () => {
    stack = await startStack({ decisions: true, gateways: 2 });
    redis = new Redis(requiredEnv('REDIS_URL'));
  });
  after(async () => {
    redis?.disconnect();
    await stack?.stop();
  });
  return {
    get stack() {
      if (!stack) throw new Error('the stack starts before the first test');
      return stack;
    },
    async subscribers(questionId) {
      if (!redis || !stack) throw new Error('the stack starts before the first test');
      const [, count] = (await redis.pubsub('NUMSUB', answerChannel(stack.topicPrefix, questionId))) as [string, number];
      return Number(count);
    },
  };
}

/** The id of the workspace's only question, read from the decision service's table (for a call still waiting). */
export async function onlyQuestionId(workspaceId: string): Promise<string> {
  const db = await connectDatabase();
  try {
    for (;;) {
      const { rows } = await db.query<{ id: string }>(`SELECT id FROM decision.questions WHERE workspace_id = $1`, [workspaceId]);
      if (rows[0]) return rows[0].id;
      await sleep(20);
    }
  } finally {
    await db.end();
  }
}
