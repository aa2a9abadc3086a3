// Shared by the Redfish adapter's tests: a system's address parsed from a config section as a user writes it,
// and the checks every failure must pass.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { redfishBackend } from "../../../src/adapters/redfish/backend.ts";
import type { RedfishSystem } from "../../../src/adapters/redfish/redfish-system.ts";
import { Secret } from "../../../src/adapters/secret.ts";
import { isPlugpoolError, type ErrorCode } from "../../../src/domain/errors.ts";

export interface Login {
  readonly username: string;
  readonly password: string;
}

/** The address `redfishBackend.parse` makes of `section` with these credentials (from the environment); fails on any issue. */
export function addressOf(section: Record<string, unknown>, login: Login): RedfishSystem {
  const issues: string[] = [];
  const parsed = redfishBackend.parse(section, {
    path: ["redfish"],
    report: (path, message) => issues.push(`${path.join(".")}: ${message}`),
    secretFile: (file) => new Secret(readFileSync(file, "utf8")),
    env: { PLUGPOOL_REDFISH_USERNAME: login.username, PLUGPOOL_REDFISH_PASSWORD: login.password },
  });
  assert.deepEqual(issues, []);
  assert.ok(parsed);
  return parsed.address;
}

/** Runs `work` and returns what it threw (failing the test if it did not throw). */
export async function failureOf(work: () => Promise<unknown>): Promise<Error & { code: ErrorCode; cause?: unknown }> {
  try {
    await work();
  } catch (error) {
    assert.ok(isPlugpoolError(error), `a PlugpoolError, not ${String(error)}`);
    return error;
  }
  assert.fail("expected the call to fail");
}

/** The error has this code and message, and neither it nor its cause holds any of `secrets`. */
export function assertFailure(error: Error & { code: ErrorCode; cause?: unknown }, code: ErrorCode, message: RegExp, secrets: readonly string[] = []): void {
  assert.equal(error.code, code, error.message);
  assert.match(error.message, message);
  const text = `${error.message} ${String(error.cause)} ${JSON.stringify(error.cause)}`;
  for (const secret of secrets) assert.ok(!text.includes(secret), `the error holds ${JSON.stringify(secret)}: ${text}`);
}

export { acceptAny, expectDevice } from "../esphome/support.ts";
