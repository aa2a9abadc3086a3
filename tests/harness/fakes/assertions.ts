import assert from "node:assert/strict";
import type { ErrorCode } from "../../../src/domain/index.ts";
import { isPlugpoolError } from "../../../src/domain/index.ts";

function check(e: unknown, code: ErrorCode, message?: RegExp): true {
  assert.ok(isPlugpoolError(e), `expected a PlugpoolError, got ${String(e)}`);
  assert.equal(e.code, code, e.message);
  if (message !== undefined) assert.match(e.message, message);
  return true;
}

/** The promise rejects with a PlugpoolError of this code (and a message matching `message`). */
export async function rejectsWith(promise: Promise<unknown>, code: ErrorCode, message?: RegExp): Promise<void> {
  await assert.rejects(promise, (e: unknown) => check(e, code, message));
}

/** The function throws a PlugpoolError of this code. */
export function throwsWith(fn: () => unknown, code: ErrorCode, message?: RegExp): void {
  assert.throws(fn, (e: unknown) => check(e, code, message));
}
