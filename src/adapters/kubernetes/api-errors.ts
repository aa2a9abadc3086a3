// Reading failed API calls: the HTTP status, the apiserver's own reason, and the one PlugpoolError they
// become. Every request is bounded: by the caller's signal and by a timeout of its own.
import { ApiException, Observable, type ConfigurationOptions, type RequestContext } from "@kubernetes/client-node";
import { PlugpoolError } from "../../domain/errors.ts";

/** How long one cluster write may take, unless configured otherwise. */
export const DEFAULT_WRITE_TIMEOUT_MS = 10_000;

/** HTTP status of a failed call; undefined when no answer came back. */
export function statusOf(error: unknown): number | undefined {
  return error instanceof ApiException ? (error as ApiException<unknown>).code : undefined;
}

/**
 * The apiserver's explanation: the `message` of its Status answer, else the HTTP status or the error's message.
 * A request's own error may quote its URL, so any user name and password in it are redacted.
 */
export function apiserverReason(error: unknown): string {
  if (error instanceof ApiException) {
    const { body, code } = error as ApiException<unknown>;
    const message = typeof body === "string" ? statusMessage(body) : undefined;
    return message ?? `HTTP ${code}`;
  }
  if (error instanceof Error) {
    const cause = (error.cause as { code?: unknown } | undefined)?.code;
    return redactUserinfo(typeof cause === "string" ? `${error.message} (${cause})` : error.message);
  }
  return redactUserinfo(String(error));
}

/** `text` with the user name and password of every URL in it (the part before the host's `@`) redacted. */
export function redactUserinfo(text: string): string {
  return text.replace(/\/\/[^\s/?#]+@/g, "//[redacted]@");
}

function statusMessage(body: string): string | undefined {
  try {
    const status = JSON.parse(body) as { message?: unknown };
    return typeof status.message === "string" && status.message !== "" ? status.message : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The error for a failed call: `cluster-refused` either way, quoting the apiserver's reason when it answered and
 * saying it did not when it could not be reached. `action` says what was attempted, e.g. `deleting Node "worker-1"`.
 */
export function clusterError(action: string, error: unknown, hint = ""): PlugpoolError {
  const reason = apiserverReason(error);
  if (statusOf(error) !== undefined) {
    return new PlugpoolError("cluster-refused", `${action} was refused by the apiserver: ${reason}${hint}`, { cause: error });
  }
  return new PlugpoolError("cluster-refused", `${action} failed, the apiserver did not answer: ${reason}`, { cause: error });
}

/** The limits of one call, made of one or more requests. */
export interface CallBound {
  /** Aborts the requests once the caller's signal aborts or the timeout has passed. */
  readonly signal: AbortSignal;
  /**
   * The error for a request that failed under this bound: `cancelled` when the caller's signal ended it,
   * `cluster-refused` saying so when the timeout did, else as clusterError().
   */
  error(action: string, error: unknown, hint?: string): PlugpoolError;
}

/** Bounds a call by `timeoutMs` from now and by the caller's signal, when given. */
export function callBound(timeoutMs: number, caller?: AbortSignal): CallBound {
  const timeout = AbortSignal.timeout(timeoutMs);
  return {
    signal: caller === undefined ? timeout : AbortSignal.any([caller, timeout]),
    error(action, error, hint = "") {
      // An answer that came back is the apiserver's, even if a signal aborted just after it.
      if (statusOf(error) === undefined) {
        if (caller?.aborted === true) {
          const reason: unknown = caller.reason;
          return new PlugpoolError("cancelled", `${action} ended before it finished: ${apiserverReason(reason)}`, { cause: reason });
        }
        if (timeout.aborted) return new PlugpoolError("cluster-refused", `${action} timed out after ${timeoutMs} ms`, { cause: error });
      }
      return clusterError(action, error, hint);
    },
  };
}

/**
 * Per-call options for client-node's API classes: an abort signal and, for patches, the content type.
 * client-node 2.x takes these as request middleware; the signal reaches its fetch, so an abort cancels the
 * HTTP request itself, not only the wait for it.
 */
export function callOptions(options: { signal?: AbortSignal | undefined; contentType?: string }): ConfigurationOptions {
  const { signal, contentType } = options;
  return {
    middleware: [
      {
        pre: (context: RequestContext) => {
          if (signal !== undefined) context.setSignal(signal);
          if (contentType !== undefined) context.setHeaderParam("Content-Type", contentType);
          return new Observable(Promise.resolve(context));
        },
        post: (response) => new Observable(Promise.resolve(response)),
      },
    ],
    middlewareMergeStrategy: "append",
  };
}
