export * from './audience.js';
export * from './content.js';
export * from './keys.js';
export * from './plans.js';
export * from './scopes.js';
export * from './engagement.js';
export * from './placeholders.js';
export * from './questions.js';
