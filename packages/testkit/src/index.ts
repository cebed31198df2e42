export * from './admin.js';
export * from './http.js';
export * from './processes.js';
export * from './database.js';
