// Shared helpers of the ESPHome adapter tests: emulated plugs that close with the test, timing of a
// call, and the checks every plug error must pass.
import assert from "node:assert/strict";
import type { TestContext } from "node:test";
import { inspect } from "node:util";
import { parsePlugUrl } from "../../../src/adapters/esphome/plug.ts";
import { isPlugpoolError, type ErrorCode } from "../../../src/domain/errors.ts";
import type { EsphomePlug } from "../../../src/adapters/esphome/plug.ts";
import type { CutGuard, DeviceCheck, DeviceIdentity } from "../../../src/domain/ports.ts";
import { startPlugEmulator, type EmulatedPlug, type PlugEmulatorOptions } from "../../harness/plug-emulator/index.ts";

/** Starts an emulated plug that closes when the test ends. */
export async function emulate(t: TestContext, opts: PlugEmulatorOptions = {}): Promise<EmulatedPlug> {
  const plug = await startPlugEmulator(opts);
  t.after(() => plug.close());
  return plug;
}

export interface Timed<T> {
  readonly ms: number;
  readonly value?: T;
  readonly error?: unknown;
}

/** Runs a call and reports how long it took and how it ended. */
export async function timed<T>(call: () => Promise<T>): Promise<Timed<T>> {
  const start = performance.now();
  try {
    const value = await call();
    return { ms: performance.now() - start, value };
  } catch (error) {
    return { ms: performance.now() - start, error };
  }
}

/** Asserts the error is a PlugpoolError with this code and a message matching `message`. */
export function assertPlugError(error: unknown, code: ErrorCode, message: RegExp): void {
  assert.ok(isPlugpoolError(error), `expected a PlugpoolError, got ${inspect(error)}`);
  assert.equal(error.code, code, error.message);
  assert.match(error.message, message);
}

/** The address of a switch of the plug at `url`, with its device named as the configuration names it. */
export function addressOf(url: string, name = "Relay", powerSensor?: string): EsphomePlug {
  const normalised = parsePlugUrl(url);
  assert.ok(normalised.ok, `a plug URL: ${url}`);
  return { url: normalised.url, device: normalised.device, switch: name, ...(powerSensor === undefined ? {} : { powerSensor }) };
}

/** A cut guard that always allows the cut. */
export const allowCut: CutGuard = () => Promise.resolve(true);

/** A device check that accepts whatever the device answers as: for tests that are not about which device it is. */
export const acceptAny: DeviceCheck = () => Promise.resolve(true);

/** A device check that accepts only a device answering as `id`, and keeps every identity it was asked with. */
export interface StrictCheck extends DeviceCheck {
  readonly seen: DeviceIdentity[];
}

export function expectDevice(id: string): StrictCheck {
  const seen: DeviceIdentity[] = [];
  return Object.assign((identity: DeviceIdentity) => {
    seen.push(identity);
    return Promise.resolve(identity.id === id);
  }, { seen });
}

/**
 * A fetch that answers `GET /events` as a device called `name` does (a stream opening with its ping) and hands
 * every other request to `fetch`: for tests that play the device's answers to the switch commands themselves.
 */
export function withEvents(fetch: typeof globalThis.fetch, name = "plug"): typeof globalThis.fetch {
  return (input, init) => {
    const url = input instanceof Request ? input.url : input instanceof URL ? input.href : input;
    if (!url.endsWith("/events")) return fetch(input, init);
    const ping = `event: ping\ndata: ${JSON.stringify({ title: name })}\n\n`;
    return Promise.resolve(new Response(ping, { headers: { "content-type": "text/event-stream" } }));
  };
}

/** Every way an error is usually turned into text: by a logger, a test report, a JSON encoder, a debugger. */
export function renderings(error: unknown): string[] {
  return [
    error instanceof Error ? error.message : "",
    String(error),
    JSON.stringify(error),
    inspect(error, { depth: 10 }),
    inspect(error, { depth: Infinity, showHidden: true, getters: true }),
  ];
}

/** Asserts that nothing reachable from the error (message, stack, causes, fields) holds a secret. */
export function assertNoSecret(error: unknown, secrets: readonly string[]): void {
  for (const seen of renderings(error)) {
    for (const secret of secrets) assert.ok(!seen.includes(secret), `error exposes a secret: ${seen}`);
  }
}

/** Waits until `check` holds, polling every 5 ms; fails after `withinMs`. */
export async function eventually(check: () => boolean, withinMs = 2000): Promise<void> {
  const until = performance.now() + withinMs;
  while (!check()) {
    if (performance.now() > until) assert.fail(`condition not met within ${withinMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** The paths of the recorded requests, as "METHOD path". */
export function requests(plug: EmulatedPlug): string[] {
  return plug.calls.map((c) => `${c.method} ${c.path}`);
}
