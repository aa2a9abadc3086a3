// Reading failed API calls: the HTTP status, the apiserver's own reason, and the one PlugpoolError
// they become. A call that got no answer at all (apiserver unreachable) is not a refusal.
import { ApiException, Observable, type ConfigurationOptions, type RequestContext } from "@kubernetes/client-node";
import { PlugpoolError } from "../../domain/errors.ts";

/** HTTP status of a failed call; undefined when no answer came back. */
export function statusOf(error: unknown): number | undefined {
  return error instanceof ApiException ? (error as ApiException<unknown>).code : undefined;
}

/** The apiserver's explanation: the `message` of its Status answer, else the HTTP status or the error's message. */
export function apiserverReason(error: unknown): string {
  if (error instanceof ApiException) {
    const { body, code } = error as ApiException<unknown>;
    const message = typeof body === "string" ? statusMessage(body) : undefined;
    return message ?? `HTTP ${code}`;
  }
  if (error instanceof Error) {
    const cause = (error.cause as { code?: unknown } | undefined)?.code;
    return typeof cause === "string" ? `${error.message} (${cause})` : error.message;
  }
  return String(error);
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
 * The error for a failed write: `cluster-refused` when the apiserver answered with a refusal (its reason quoted),
 * `internal` when it could not be reached. `action` says what was attempted, e.g. `deleting Node "worker-1"`.
 */
export function clusterError(action: string, error: unknown, hint = ""): PlugpoolError {
  const reason = apiserverReason(error);
  if (statusOf(error) !== undefined) {
    return new PlugpoolError("cluster-refused", `${action} was refused by the apiserver: ${reason}${hint}`, { cause: error });
  }
  return new PlugpoolError("internal", `${action} failed: ${reason}`, { cause: error });
}

/**
 * Per-call options for client-node's API classes: an abort signal and, for patches, the content type.
 * client-node 2.x takes these as request middleware.
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
