export * from './gate.js';
export * from './tools.js';
