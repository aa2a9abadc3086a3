/** The closed set of reasons a domain operation fails. The gRPC adapter maps each to one status code. */
export type ErrorCode =
  | "node-group-not-found"
  | "instance-not-found"
  | "invalid-argument"
  | "unsafe"
  | "plug-unreachable"
  | "plug-unauthorized"
  | "plug-entity-not-found"
  | "plug-bad-answer"
  /** A switch command may have reached the plug, but its outcome was not confirmed: the state is unknown. */
  | "plug-unconfirmed"
  /** The device at the control's address answered as another device: nothing was sent. */
  | "device-mismatch"
  | "cluster-refused"
  /** This process is not the acting plugpool (another instance holds the leadership, or none does yet). */
  | "not-leader"
  /** The call's signal aborted (deadline or cancel) before it finished; `cause` is the signal's reason. */
  | "cancelled"
  | "internal";

/**
 * The one error type of plugpool. Messages say what was attempted and name the plug, node or group;
 * they never carry credentials. The low-level error, if any, is kept as `cause` for logs.
 */
export class PlugpoolError extends Error {
  override readonly name = "PlugpoolError";
  readonly code: ErrorCode;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

/** Type guard that also works across duplicate copies of this module (it checks name and code, not the class). */
export function isPlugpoolError(e: unknown): e is PlugpoolError {
  return (
    e instanceof PlugpoolError ||
    (typeof e === "object" && e !== null && (e as { name?: unknown }).name === "PlugpoolError" &&
      typeof (e as { code?: unknown }).code === "string")
  );
}

/** A readable message from anything thrown. */
export function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
