import { Code, ConnectError } from "@connectrpc/connect";
import type { ErrorCode } from "../../domain/index.ts";
import { isPlugpoolError } from "../../domain/index.ts";

// The one place where domain failures become gRPC status codes (SPEC §4). cluster-autoscaler only
// special-cases Unimplemented; the other codes are for people reading CA's logs.
const codes: Readonly<Record<ErrorCode, Code>> = {
  "node-group-not-found": Code.NotFound,
  "instance-not-found": Code.NotFound,
  "invalid-argument": Code.InvalidArgument,
  unsafe: Code.FailedPrecondition,
  "plug-unreachable": Code.Unavailable,
  "plug-unauthorized": Code.Unavailable,
  "plug-entity-not-found": Code.Unavailable,
  "plug-bad-answer": Code.Unavailable,
  "cluster-refused": Code.Unavailable,
  internal: Code.Internal,
};

/**
 * Maps any thrown value to a ConnectError. Domain errors keep their message (written to be shown: it names
 * plugs and nodes, never credentials); anything else becomes "internal error" with the original kept as
 * `cause` for the log, so internals never reach the client.
 */
export function toConnectError(reason: unknown): ConnectError {
  if (reason instanceof ConnectError) return reason;
  for (let e: unknown = reason; e !== undefined && e !== null; e = (e as { cause?: unknown }).cause) {
    if (isPlugpoolError(e)) {
      return new ConnectError(e.message, codes[e.code], undefined, undefined, reason);
    }
    if (typeof e !== "object") break;
  }
  if (reason instanceof Error && reason.name === "AbortError") {
    return new ConnectError("deadline exceeded or call cancelled", Code.DeadlineExceeded, undefined, undefined, reason);
  }
  return new ConnectError("internal error", Code.Internal, undefined, undefined, reason);
}
