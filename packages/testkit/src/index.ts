export * from './admin.js';
export * from './http.js';
export * from './processes.js';
export * from './database.js';
export * from './kafka.js';
export * from './push.js';
export * from './sending.js';
export * from './webhook-receiver.js';
