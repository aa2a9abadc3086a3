// Helpers for the Home Assistant backend's tests: an entity address for a running Home Assistant (real or
// emulated), and the checks every failure must pass.
import assert from "node:assert/strict";
import { inspect } from "node:util";
import { isPlugpoolError, type PlugpoolError } from "../../../src/domain/errors.ts";
import type { HomeAssistantEntity } from "../../../src/adapters/home-assistant/entity.ts";
import { Secret } from "../../../src/adapters/secret.ts";
import type { HomeAssistantBackstage } from "../../harness/home-assistant/backstage.ts";

/** The address plugpool's configuration would give `entity` of `ha` (token: ha's, unless another is given). */
export function addressOf(ha: Pick<HomeAssistantBackstage, "url" | "token">, entity: string, extra: { powerSensor?: string; token?: string } = {}): HomeAssistantEntity {
  return {
    url: ha.url,
    instance: new URL(ha.url).host,
    entity,
    token: new Secret(extra.token ?? ha.token),
    ...(extra.powerSensor !== undefined && { powerSensor: extra.powerSensor }),
  };
}

/**
 * Awaits a call that must fail with `code`; checks that neither its message nor anything it carries (its cause,
 * as a log would print it) holds `secret`; returns the error.
 */
export async function failure(call: Promise<unknown>, code: PlugpoolError["code"], secret: string): Promise<PlugpoolError> {
  let caught: unknown;
  try {
    await call;
  } catch (error) {
    caught = error;
  }
  assert.ok(isPlugpoolError(caught), `expected a PlugpoolError ${code}, got ${inspect(caught)}`);
  assert.equal(caught.code, code, caught.message);
  const printed = inspect(caught, { depth: Infinity, showHidden: true });
  assert.ok(!printed.includes(secret), `the token shows in ${printed}`);
  return caught;
}

export { acceptAny, expectDevice } from "../esphome/support.ts";
