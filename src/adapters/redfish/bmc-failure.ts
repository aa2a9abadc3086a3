// Turns whatever ended a BMC call into a PlugpoolError code and a short detail, built from what plugpool knows
// (method, path, status, sizes, Node's error codes), never from anything the BMC sent.
import { isPlugpoolError, PlugpoolError } from "../../domain/errors.ts";

/** What the client knows of a failure, in its own words (never text the BMC sent). */
export type BmcFailureCode = "plug-unreachable" | "plug-unauthorized" | "plug-entity-not-found" | "plug-bad-answer";

export class BmcFailure extends Error {
  override readonly name = "BmcFailure";
  readonly code: BmcFailureCode;
  /** The BMC answered that it did not carry the request out (4xx): a Reset sent is known undone. */
  readonly refused: boolean;

  constructor(code: BmcFailureCode, detail: string, refused: boolean) {
    super(detail);
    this.code = code;
    this.refused = refused;
  }
}

export interface FailureContext {
  /** The caller's signal: its abort means "stop", not a BMC fault. */
  readonly callerSignal: AbortSignal | undefined;
  /** Aborted once the call's time is up. */
  readonly deadline: AbortSignal;
  readonly timeoutMs: number;
}

export interface FailureDescription {
  readonly code: BmcFailureCode;
  readonly detail: string;
  readonly cause?: unknown;
}

const NETWORK_DETAILS: Readonly<Record<string, string>> = {
  ECONNREFUSED: "connection refused",
  ECONNRESET: "connection dropped",
  EPIPE: "connection dropped",
  ENOTFOUND: "host not found",
  EAI_AGAIN: "host not found",
  EHOSTUNREACH: "host unreachable",
  ENETUNREACH: "host unreachable",
  ETIMEDOUT: "connection timed out",
};

// Errors that prove the request never left: no connection was made, or TLS refused the BMC before a byte of
// the request was written (Node writes it once the handshake and the certificate check have passed).
const NOT_CONNECTED_CODES: ReadonlySet<string> = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN"]);

// OpenSSL's verification results as Node reports them (https://nodejs.org/api/tls.html#x509-certificate-error-codes),
// and Node's own for a name the certificate does not carry.
const CERTIFICATE_CODE = /^(?:CERT_|UNABLE_TO_|DEPTH_ZERO_SELF_SIGNED_CERT$|SELF_SIGNED_CERT_IN_CHAIN$|ERR_TLS_CERT_ALTNAME_INVALID$|HOSTNAME_MISMATCH$|INVALID_CA$|PATH_LENGTH_EXCEEDED$|INVALID_PURPOSE$)/u;
// A handshake that failed before any certificate was seen (https to a plain http port, no common protocol).
const HANDSHAKE_CODE = /^(?:ERR_SSL_|EPROTO$)/u;

export function neverSent(error: unknown): boolean {
  const code = errorCode(error);
  return code !== undefined && (NOT_CONNECTED_CODES.has(code) || CERTIFICATE_CODE.test(code) || HANDSHAKE_CODE.test(code));
}

function errorCode(error: unknown): string | undefined {
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
  if (error instanceof BmcFailure) return { code: error.code, detail: error.message };
  if (ctx.deadline.aborted) return { code: "plug-unreachable", detail: `timed out after ${ctx.timeoutMs} ms` };
  const code = identifier(errorCode(error));
  if (code !== undefined && CERTIFICATE_CODE.test(code)) {
    return { code: "plug-unreachable", detail: `the BMC's TLS certificate is not trusted (${code}): check caFile`, cause: error };
  }
  if (code !== undefined && HANDSHAKE_CODE.test(code)) return { code: "plug-unreachable", detail: `TLS handshake failed (${code})`, cause: error };
  const known = code === undefined ? undefined : NETWORK_DETAILS[code];
  if (known !== undefined) return { code: "plug-unreachable", detail: known, cause: error };
  if (error instanceof Error && /socket hang up/iu.test(error.message)) return { code: "plug-unreachable", detail: "connection dropped", cause: error };
  const name = error instanceof Error ? identifier(error.name) : typeof error;
  return { code: "plug-unreachable", detail: `request failed (${code ?? name ?? "Error"})`, cause: error };
}

/**
 * What may be kept of a low-level error as a `cause`: its name and code, nothing else. Its message and fields
 * can hold the request (headers included) or bytes the BMC sent (an HTTP parser error keeps them). A
 * PlugpoolError (the cut guard's) keeps its code and message, which are plugpool's own, without its own cause.
 */
export function cleanCause(error: unknown): Error | undefined {
  if (error === undefined) return undefined;
  if (isPlugpoolError(error)) return new PlugpoolError(error.code, error.message);
  const name = (error instanceof Error ? identifier(error.name) : undefined) ?? typeof error;
  const code = identifier(errorCode(error));
  const clean = new Error(code === undefined ? name : `${name} ${code}`);
  return code === undefined ? clean : Object.assign(clean, { code });
}
