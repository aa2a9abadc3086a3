// plugpool's Logger for the end-to-end runs: every line as JSON in a file (for failure messages), and handed to
// a listener (the sandbox narrates them).
import { appendFileSync, readFileSync } from "node:fs";
import type { LogFields, Logger } from "../../../src/app/logger.ts";

export interface LogLine {
  readonly level: "debug" | "info" | "warn" | "error";
  readonly message: string;
  readonly fields: LogFields;
}

export interface FileLogger extends Logger {
  readonly path: string;
  /** The last lines written, for failure messages. */
  tail(lines?: number): string;
}

export function createFileLogger(path: string, onLine?: (line: LogLine) => void): FileLogger {
  const write = (level: LogLine["level"]) => (message: string, fields: LogFields = {}) => {
    appendFileSync(path, `${JSON.stringify({ time: new Date().toISOString(), level, message, ...fields })}\n`);
    onLine?.({ level, message, fields });
  };
  return {
    path,
    debug: write("debug"),
    info: write("info"),
    warn: write("warn"),
    error: write("error"),
    tail: (lines = 30) => {
      try {
        return readFileSync(path, "utf8").trimEnd().split("\n").slice(-lines).join("\n");
      } catch {
        return "(no log)";
      }
    },
  };
}
