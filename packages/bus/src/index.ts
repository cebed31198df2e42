export * from './kafka.js';
export * from './outbox.js';
