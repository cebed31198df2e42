export * from './unreachable.js';
export * from './claims.js';
export * from './listen.js';
export * from './loop.js';
