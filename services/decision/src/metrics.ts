import { meter } from '@herald/telemetry';

/**
 * The decision service's metrics: questions (asks and decisions) by what happened to them. An
 * expiry is counted when the expiry sweep records it (at most a sweep interval after the question
 * read as expired).
 */
const questions = meter('decision').createCounter('herald.questions', {
  description: 'Questions (asks and decisions) opened, answered, cancelled (or withdrawn) and expired unanswered, by kind',
  unit: '{question}',
});

export function countQuestion(event: 'opened' | 'answered' | 'cancelled' | 'expired', kind: 'ask' | 'decision'): void {
  questions.add(1, { event, kind });
}

const deliveries = meter('decision').createCounter('herald.question.deliveries', {
  description: 'Deliveries of questions by channel (web_push, slack, email) and outcome: delivered, failed (refused for good), skipped (no longer open), retried (tried again later)',
  unit: '{delivery}',
});

export function countDelivery(channel: string, outcome: 'delivered' | 'failed' | 'skipped' | 'retried'): void {
  deliveries.add(1, { channel, outcome });
}

const answers = meter('decision').createCounter('herald.question.answers', {
  description: 'Answers by the channel they came from (slack, email, web_push, answer_page, api, console): answered, repeated (the answer already recorded, from whoever gave it: a retry) or refused (not an approver)',
  unit: '{answer}',
});

export function countAnswer(channel: string, outcome: 'answered' | 'repeated' | 'refused'): void {
  answers.add(1, { channel, outcome });
}
