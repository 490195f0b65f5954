// k6 has a console, but @types/k6 does not declare one, and the DOM lib
// would declare browser globals that k6 lacks.
declare var console: {
  log(...data: unknown[]): void;
  info(...data: unknown[]): void;
  warn(...data: unknown[]): void;
  error(...data: unknown[]): void;
  debug(...data: unknown[]): void;
};
