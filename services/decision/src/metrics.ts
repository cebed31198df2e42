import { meter } from '@herald/telemetry';

/**
 * The decision service's metrics: questions (asks and decisions) by what happened to them. An
 * expiry is no event (a question reads as expired once its time has passed), so it is not counted.
 */
const questions = meter('decision').createCounter('herald.questions', {
  description: 'Questions (asks and decisions) opened, answered and cancelled (or withdrawn), by kind',
  unit: '{question}',
});

export function countQuestion(event: 'opened' | 'answered' | 'cancelled', kind: 'ask' | 'decision'): void {
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
  description: 'Answers by the channel they came from (slack, email, web_push, answer_page, api, console): answered, or refused (not an approver)',
  unit: '{answer}',
});

export function countAnswer(channel: string, outcome: 'answered' | 'refused'): void {
  answers.add(1, { channel, outcome });
}
