export * from './component.js';
export * from './launch.js';
