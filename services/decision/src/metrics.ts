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
