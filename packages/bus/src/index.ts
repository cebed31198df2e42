export * from './kafka.js';
export * from './outbox.js';
export * from './topics.js';
export * from './batching.js';
