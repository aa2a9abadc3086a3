import winston from "winston";

/** Structured fields plugpool logs with; values are names and numbers, never credentials. */
export type LogFields = Readonly<Record<string, string | number | boolean | undefined>>;

export interface Logger {
  debug(message: string, fields?: LogFields): void;
  info(message: string, fields?: LogFields): void;
  warn(message: string, fields?: LogFields): void;
  error(message: string, fields?: LogFields): void;
}

/** JSON lines on stdout (one object per line: time, level, message, fields). */
export function createLogger(options: { level?: string; silent?: boolean } = {}): Logger {
  const logger = winston.createLogger({
    level: options.level ?? "info",
    silent: options.silent ?? false,
    format: winston.format.combine(winston.format.timestamp(), winston.format.json()),
    transports: [new winston.transports.Console()],
  });
  return {
    debug: (message, fields) => logger.debug(message, fields),
    info: (message, fields) => logger.info(message, fields),
    warn: (message, fields) => logger.warn(message, fields),
    error: (message, fields) => logger.error(message, fields),
  };
}
