import { Code, ConnectError } from "@connectrpc/connect";
import type { ErrorCode, PlugpoolError } from "../../domain/index.ts";
import { isPlugpoolError } from "../../domain/index.ts";

/**
 * Longest message (in characters) sent to the client. The message travels in the grpc-message trailer:
 * a domain message listing every ref of a huge request would overflow the client's header limits, and
 * the stream would end in RST_STREAM instead of a status.
 */
export const MAX_MESSAGE_CHARS = 1024;

// The one place where domain failures become gRPC status codes. cluster-autoscaler only special-cases
// Unimplemented; the other codes are for people reading CA's logs.
const codes: Readonly<Record<Exclude<ErrorCode, "cancelled">, Code>> = {
  "node-group-not-found": Code.NotFound,
  "instance-not-found": Code.NotFound,
  "invalid-argument": Code.InvalidArgument,
  unsafe: Code.FailedPrecondition,
  "plug-unreachable": Code.Unavailable,
  "plug-unauthorized": Code.Unavailable,
  "plug-entity-not-found": Code.Unavailable,
  "plug-bad-answer": Code.Unavailable,
  "plug-unconfirmed": Code.Unavailable,
  "device-mismatch": Code.FailedPrecondition,
  "cluster-refused": Code.Unavailable,
  // CA's loop fails and tries again later; the message names the instance that acts.
  "not-leader": Code.Unavailable,
  internal: Code.Internal,
};

/** Whether an abort reason is a deadline (connect's own, or AbortSignal.timeout's) rather than a cancel. */
function isDeadline(reason: unknown): boolean {
  if (reason instanceof ConnectError) return reason.code === Code.DeadlineExceeded;
  // DOMException is an Error in Node.
  return reason instanceof Error && reason.name === "TimeoutError";
}

function codeOf(e: PlugpoolError): Code {
  if (e.code === "cancelled") return isDeadline(e.cause) ? Code.DeadlineExceeded : Code.Canceled;
  return codes[e.code];
}

/** `message` cut to MAX_MESSAGE_CHARS, saying how much was left out. */
export function boundedMessage(message: string): string {
  if (message.length <= MAX_MESSAGE_CHARS) return message;
  const suffix = (left: number) => `… (${left} more characters)`;
  // The suffix counts towards the bound; its length depends on the number it carries.
  let keep = MAX_MESSAGE_CHARS - suffix(message.length).length;
  // Never split a surrogate pair.
  if (/[\uDC00-\uDFFF]/.test(message.charAt(keep))) keep--;
  return message.slice(0, keep) + suffix(message.length - keep);
}

/**
 * Maps any thrown value to a ConnectError with a bounded message. Domain errors keep their message
 * (written to be shown: it names plugs and nodes, never credentials); anything else becomes "internal
 * error" with the original kept as `cause` for the log, so internals never reach the client.
 */
export function toConnectError(reason: unknown): ConnectError {
  if (reason instanceof ConnectError) {
    if (reason.rawMessage.length <= MAX_MESSAGE_CHARS) return reason;
    const bounded = new ConnectError(boundedMessage(reason.rawMessage), reason.code, reason.metadata, undefined, reason.cause);
    bounded.details = reason.details;
    return bounded;
  }
  for (let e: unknown = reason; e !== undefined && e !== null; e = (e as { cause?: unknown }).cause) {
    if (isPlugpoolError(e)) {
      return new ConnectError(boundedMessage(e.message), codeOf(e), undefined, undefined, reason);
    }
    if (typeof e !== "object") break;
  }
  if (reason instanceof Error && reason.name === "AbortError") {
    return new ConnectError("deadline exceeded or call cancelled", Code.DeadlineExceeded, undefined, undefined, reason);
  }
  return new ConnectError("internal error", Code.Internal, undefined, undefined, reason);
}
