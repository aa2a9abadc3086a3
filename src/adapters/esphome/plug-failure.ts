// Turns whatever ended a plug call into a PlugpoolError code and a short detail. Details name what
// happened, never a header or a credential; the kept `cause` is the low-level error without the
// request (ky's errors carry the Request, and with it the Authorization header, so they are not kept).
import { isKyError } from "ky";
import type { ErrorCode } from "../../domain/errors.ts";

/** A classified failure; `message` is the detail that follows "<action> plug <url> <entity>: ". */
export class PlugFailure extends Error {
  override readonly name = "PlugFailure";
  readonly code: Extract<ErrorCode, `plug-${string}`>;

  constructor(code: PlugFailure["code"], detail: string) {
    super(detail);
    this.code = code;
  }
}

// Errors that mean the connection went away under the request: an ESP32 purging an idle keep-alive
// socket, an ESP8266 closing after each answer, a reboot (reference/esphome-web-server.md §6).
const DROPPED_CODES: ReadonlySet<string> = new Set(["ECONNRESET", "EPIPE", "UND_ERR_SOCKET"]);

export function isDroppedConnection(error: unknown): boolean {
  for (let e: unknown = error; e instanceof Error; e = e.cause) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && DROPPED_CODES.has(code)) return true;
    if (/socket hang up|other side closed/iu.test(e.message)) return true;
  }
  return false;
}

export interface FailureContext {
  /** The caller's signal: its abort means "stop", not a plug fault. */
  readonly callerSignal: AbortSignal | undefined;
  /** Aborted once the call's time is up. */
  readonly deadline: AbortSignal;
  readonly timeoutMs: number;
}

export interface FailureDescription {
  readonly code: PlugFailure["code"];
  readonly detail: string;
  readonly cause?: unknown;
}

const NETWORK_DETAILS: Readonly<Record<string, string>> = {
  ECONNREFUSED: "connection refused",
  ENOTFOUND: "host not found",
  EAI_AGAIN: "host not found",
  EHOSTUNREACH: "host unreachable",
  ENETUNREACH: "host unreachable",
  ETIMEDOUT: "connection timed out",
  UND_ERR_CONNECT_TIMEOUT: "connection timed out",
};

function errorCode(error: unknown): string | undefined {
  for (let e: unknown = error; e instanceof Error; e = e.cause) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string") return code;
  }
  return undefined;
}

export function describeFailure(error: unknown, ctx: FailureContext): FailureDescription {
  if (ctx.callerSignal?.aborted === true) return { code: "plug-unreachable", detail: "aborted", cause: ctx.callerSignal.reason };
  if (error instanceof PlugFailure) return { code: error.code, detail: error.message };
  if (ctx.deadline.aborted) return { code: "plug-unreachable", detail: `timed out after ${ctx.timeoutMs} ms`, cause: ctx.deadline.reason };
  const lowLevel = isKyError(error) ? error.cause : error;
  if (isDroppedConnection(error)) return { code: "plug-unreachable", detail: "connection dropped", cause: lowLevel };
  const code = errorCode(error);
  const known = code === undefined ? undefined : NETWORK_DETAILS[code];
  if (known !== undefined) return { code: "plug-unreachable", detail: known, cause: lowLevel };
  const name = error instanceof Error ? error.name : typeof error;
  return { code: "plug-unreachable", detail: `request failed (${code ?? name})`, cause: lowLevel };
}
