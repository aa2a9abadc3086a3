// Turns whatever ended a device call into a PlugpoolError code and a short detail. Details are built from what
// plugpool knows (method, path, status, sizes, Node's error codes), never from anything the device sent: a
// device, a captive portal or a proxy can echo the request, Authorization header included, into its answer.
import type { ErrorCode } from "../../domain/errors.ts";
import { isPlugpoolError, PlugpoolError } from "../../domain/errors.ts";

/** A classified failure; `message` is the detail that follows "<action> <control>: ". */
export class PlugFailure extends Error {
  override readonly name = "PlugFailure";
  readonly code: Extract<ErrorCode, `plug-${string}`>;
  /** The device answered that it did not carry the request out (401, 404, an RPC error…): a command sent is known undone. */
  readonly refused: boolean;

  constructor(code: PlugFailure["code"], detail: string, options: { refused?: boolean } = {}) {
    super(detail);
    this.code = code;
    this.refused = options.refused ?? false;
  }
}

// Errors that mean the connection went away under the request: a device purging an idle keep-alive socket,
// closing after each answer, or rebooting.
const DROPPED_CODES: ReadonlySet<string> = new Set(["ECONNRESET", "EPIPE", "UND_ERR_SOCKET"]);

export function isDroppedConnection(error: unknown): boolean {
  for (let e: unknown = error; e instanceof Error; e = e.cause) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && DROPPED_CODES.has(code)) return true;
    if (/socket hang up|other side closed/iu.test(e.message)) return true;
  }
  return false;
}

/** A failure a backend names in its own words, by the error's code (e.g. a BMC's TLS certificate). */
export type VendorFailure = (code: string) => { readonly code: PlugFailure["code"]; readonly detail: string } | undefined;

export interface FailureContext {
  /** The caller's signal: its abort means "stop", not a device fault. */
  readonly callerSignal: AbortSignal | undefined;
  /** The call's time is up. */
  timedOut(): boolean;
  readonly timeoutMs: number;
  /** What the backend reads in an error's code before the network errors every device shares. */
  readonly vendorFailure?: VendorFailure | undefined;
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

// Errors that prove the request never left: no connection was made. (A timeout or an unreachable host may
// also strike a connection already carrying the request, so they prove nothing.)
const NOT_CONNECTED_CODES: ReadonlySet<string> = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "UND_ERR_CONNECT_TIMEOUT"]);

export function neverConnected(error: unknown): boolean {
  const code = errorCode(error);
  return code !== undefined && NOT_CONNECTED_CODES.has(code);
}

/** The first string `code` along the error's chain of causes (Node's and undici's errors carry one). */
export function errorCode(error: unknown): string | undefined {
  for (let e: unknown = error; e instanceof Error; e = e.cause) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string") return code;
  }
  return undefined;
}

/** `text` when it is a plain identifier (an error name or code), else undefined. */
function identifier(text: unknown): string | undefined {
  return typeof text === "string" && /^[A-Za-z_][A-Za-z0-9_]{0,63}$/u.test(text) ? text : undefined;
}

export function describeFailure(error: unknown, ctx: FailureContext): FailureDescription {
  if (ctx.callerSignal?.aborted === true) return { code: "plug-unreachable", detail: "aborted", cause: ctx.callerSignal.reason };
  if (error instanceof PlugFailure) return { code: error.code, detail: error.message };
  // No cause: the detail says all there is, and a timeout is the common case (no error is built for it).
  if (ctx.timedOut()) return { code: "plug-unreachable", detail: `timed out after ${ctx.timeoutMs} ms` };
  const code = identifier(errorCode(error));
  const vendor = code === undefined ? undefined : ctx.vendorFailure?.(code);
  if (vendor !== undefined) return { ...vendor, cause: error };
  if (isDroppedConnection(error)) return { code: "plug-unreachable", detail: "connection dropped", cause: error };
  const known = code === undefined ? undefined : NETWORK_DETAILS[code];
  if (known !== undefined) return { code: "plug-unreachable", detail: known, cause: error };
  const name = error instanceof Error ? identifier(error.name) : typeof error;
  return { code: "plug-unreachable", detail: `request failed (${code ?? name ?? "Error"})`, cause: error };
}

/**
 * What may be kept of a low-level error as a `cause`: its name and code, nothing else. Its message and fields
 * can hold the request (an error of a request library may carry it, Authorization header included) or the bytes the
 * device sent (an HTTP parser error keeps them). A PlugpoolError (the cut guard's) keeps its code and message,
 * which are plugpool's own, without its own cause.
 */
export function cleanCause(error: unknown): Error | undefined {
  if (error === undefined) return undefined;
  if (isPlugpoolError(error)) return new PlugpoolError(error.code, error.message);
  const name = (error instanceof Error ? identifier(error.name) : undefined) ?? typeof error;
  const code = identifier(errorCode(error));
  const clean = new Error(code === undefined ? name : `${name} ${code}`);
  return code === undefined ? clean : Object.assign(clean, { code });
}

/** The options of an error whose cause is what `cleanCause` keeps of `error`. */
export function causeOf(error: unknown): { cause: Error } | undefined {
  const cause = cleanCause(error);
  return cause === undefined ? undefined : { cause };
}
