export * from './client.js';
export * from './errors.js';
export * from './identity.js';
export * from './types.js';
export * from './webhooks.js';
