// k6's console (https://grafana.com/docs/k6/latest/javascript-api/#console-logging): a global
// k6 has that @types/k6 does not declare, and this tsconfig has no DOM to take it from.
declare const console: {
  log(...args: unknown[]): void;
  info(...args: unknown[]): void;
  warn(...args: unknown[]): void;
  error(...args: unknown[]): void;
  debug(...args: unknown[]): void;
};
