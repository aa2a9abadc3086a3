// The PowerSwitch rules over Home Assistant's REST API (https://developers.home-assistant.io/docs/api/rest/):
// read a switch entity's state, call switch.turn_on/turn_off, read it back until it shows the result.
import type { PlugReading } from "../../domain/model.ts";
import type { CallOptions, CutGuard } from "../../domain/ports.ts";
import { createBoundedCall, readyToSend } from "../http-device/device-call.ts";
import { describeFailure, neverConnected, PlugFailure } from "../http-device/device-failure.ts";
import { createDeviceQueue } from "../http-device/device-queue.ts";
import type { BackendProbe, BackendSwitch } from "../power-backend.ts";
import type { HomeAssistantEntity } from "./entity.ts";
import { readAll, readSwitch, readVersion } from "./entity-state.ts";
import { createHubApi, REFUSALS, statusFailure, type Call, type HubAnswer, type HubApi } from "./hub-api.ts";
import { pause } from "../cut-guard.ts";

export { MAX_ANSWER_BYTES } from "./hub-api.ts";

// After a service call the entity is read back this often until it shows the result. Home Assistant answers a
// service call once the call is done, so a helper or a local switch shows it at the first read; a switch of a
// radio device shows it when the device reports back.
const CONFIRM_POLL_MS = 100;

export interface HomeAssistantSwitchOptions {
  /** Bound on each call, including its wait behind other calls to the same entity. */
  readonly timeoutMs: number;
}

/** What switching works with: the API, and the bound on each call (named when a read-back never showed the result). */
interface Switching {
  readonly api: HubApi;
  readonly timeoutMs: number;
}

export function createHomeAssistantSwitch(opts: HomeAssistantSwitchOptions): BackendSwitch<HomeAssistantEntity> {
  const api = createHubApi();
  const switching: Switching = { api, timeoutMs: opts.timeoutMs };
  // One call at a time per entity: a read-back and the next command of the same machine never cross. The
  // instance itself serves many requests at once.
  const queue = createDeviceQueue();

  const calls = createBoundedCall<HomeAssistantEntity, string>({
    timeoutMs: opts.timeoutMs,
    target: (address) => `${address.instance} ${address.entity}`,
    where: (address, action) => `${action} Home Assistant ${address.url} entity ${address.entity}`,
    unsafe: "the switch-off was refused by the safety check; nothing was sent",
    command: "the service call",
  });

  /** One call with the entity's slot held throughout. */
  function bounded<T>(address: HomeAssistantEntity, action: string, options: CallOptions | undefined, work: (call: Call) => Promise<T>): Promise<T> {
    return calls(address, action, options, (call) => queue.run(call.target, call.signal, () => work(call)));
  }

  return {
    // A read's device check, like a command's, is never asked: the entity id is the identity (see `command`).
    read: (address, options) =>
      bounded(address, "reading", options, async (call) => {
        const { on, watts } = await readAll(api, address, call);
        return watts === undefined ? { on } : { on, watts };
      }),
    turnOn: (address, options) => bounded(address, "turning on", options, (call) => command(switching, address, true, call)),
    turnOff: (address, mayCut, options) => bounded(address, "turning off", options, (call) => command(switching, address, false, call, mayCut)),
    probe: (address, options) =>
      bounded(address, "probing", options, async (call): Promise<BackendProbe> => {
        const { on, watts, sensorError } = await readAll(api, address, call);
        const release = await readVersion(api, address, call);
        return {
          state: on ? "on" : "off",
          detail: `Home Assistant ${release ?? "(version not told)"}, switch.turn_on/turn_off`,
          ...(watts === undefined ? {} : { watts }),
          ...(sensorError === undefined ? {} : { sensorError }),
        };
      }),
  };
}

/**
 * Reads the entity, and when it is not yet as asked calls `switch.turn_on` or `switch.turn_off`. `mayCut`, when
 * given, is asked right before the call is sent, with the entity's slot held. The device check of the switch
 * options is never asked: an entity id is the entity's address and its identity at once, and Home Assistant
 * itself keeps it bound to the device it names (a replaced plug gets a new entity, or the old id only once
 * someone gives it to the new one).
 */
async function command(switching: Switching, address: HomeAssistantEntity, on: boolean, call: Call, mayCut?: CutGuard): Promise<PlugReading> {
  const { api } = switching;
  api.command(call);
  if ((await readSwitch(api, address, call)) === on) return { on };
  await readyToSend(call, "address is identity", mayCut);
  const path = `/api/services/switch/${on ? "turn_on" : "turn_off"}`;
  let answer: HubAnswer;
  try {
    answer = await api.send(address, call, "POST", path, { entity_id: address.entity });
  } catch (error) {
    if (neverConnected(error)) call.commandSent = false;
    throw error;
  }
  if (answer.status !== 200) {
    if (REFUSALS.has(answer.status)) call.commandSent = false;
    throw statusFailure(answer, "POST", path);
  }
  return confirm(switching, address, on, call);
}

/** Reads the entity back until it shows `on`, or until the call's deadline. */
async function confirm({ api, timeoutMs }: Switching, address: HomeAssistantEntity, on: boolean, call: Call): Promise<PlugReading> {
  let last = "no read-back succeeded";
  for (;;) {
    try {
      const now = await readSwitch(api, address, call);
      if (now === on) return { on };
      last = `it still reads ${now ? "on" : "off"}`;
    } catch (error) {
      // Unreachable moments (the device reporting unavailable, a dropped connection) are waited out until
      // the deadline; the token refused, the entity gone or a bad answer end the wait.
      const seen = describeFailure(error, call);
      if (seen.code !== "plug-unreachable") throw new PlugFailure("plug-unconfirmed", `state not confirmed (reading it back: ${seen.detail})`);
      if (!call.signal.aborted) last = seen.detail;
    }
    if (!(await pause(CONFIRM_POLL_MS, call.signal))) break;
  }
  throw new PlugFailure("plug-unconfirmed", `state not confirmed within ${timeoutMs} ms (${last})`);
}
