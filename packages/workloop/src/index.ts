export * from './backoff.js';
export * from './claims.js';
export * from './listen.js';
export * from './loop.js';
