import winston from "winston";

/** Structured fields plugpool logs with; values are names and numbers, never credentials. */
export type LogFields = Readonly<Record<string, string | number | boolean | undefined>>;

export interface Logger {
  debug(message: string, fields?: LogFields): void;
  info(message: string, fields?: LogFields): void;
  warn(message: string, fields?: LogFields): void;
  error(message: string, fields?: LogFields): void;
}

/** The levels plugpool logs at, most severe first. */
export const LOG_LEVELS = ["error", "warn", "info", "debug"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** A level by name, in any letter case (`INFO` is `info`); undefined for anything else. */
export function parseLogLevel(text: string): LogLevel | undefined {
  const lower = text.toLowerCase();
  return LOG_LEVELS.find((level) => level === lower);
}

/**
 * JSON lines on stdout (one object per line: time, level, message, fields). Throws on an unknown level:
 * winston would take it and log nothing at all.
 */
export function createLogger(options: { level?: string; silent?: boolean } = {}): Logger {
  const level = parseLogLevel(options.level ?? "info");
  if (level === undefined) throw new Error(`unknown log level ${JSON.stringify(options.level)}; expected ${LOG_LEVELS.join(", ")}`);
  const logger = winston.createLogger({
    level,
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
