/** Questions (/ask, /decisions) as more than one component sees them. */

/**
 * The Redis channel a question's wake-up is published on: the decision service publishes once an
 * answer or a cancellation is committed, and every gateway replica holding a caller waiting on
 * that question is subscribed to it.
 */
export const answerChannel = (questionId: string): string => `herald:answered:${questionId}`;
