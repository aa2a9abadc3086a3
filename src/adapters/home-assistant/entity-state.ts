// Reading entities through Home Assistant's REST API: a switch entity's on or off, a power sensor's watts, and
// the instance's version.
import { parseObject, sizeOf } from "../http-device/answer.ts";
import { describeFailure, PlugFailure } from "../http-device/device-failure.ts";
import type { HomeAssistantEntity } from "./entity.ts";
import { statusFailure, type Call, type HubApi } from "./hub-api.ts";

/** The state object of an entity; throws for any answer but 200 with one. */
async function readState(api: HubApi, address: HomeAssistantEntity, entity: string, call: Call): Promise<Record<string, unknown>> {
  const path = `/api/states/${entity}`;
  const answer = await api.send(address, call, "GET", path);
  if (answer.status !== 200) throw statusFailure(answer, "GET", path);
  const state = parseObject(answer.body);
  if (state?.entity_id !== entity || typeof state.state !== "string") {
    throw new PlugFailure("plug-bad-answer", `GET ${path} answered without the entity's state ${sizeOf(answer)}`);
  }
  return state;
}

/** on or off; an entity Home Assistant cannot tell the state of is a failed read, never off. */
export async function readSwitch(api: HubApi, address: HomeAssistantEntity, call: Call): Promise<boolean> {
  const { state, attributes } = await readState(api, address, address.entity, call);
  // An assumed state is what Home Assistant last asked of the device, not what the device reports (an optimistic
  // template switch, a radio switch that never answers; `assumed_state` in
  // https://developers.home-assistant.io/docs/core/entity/#generic-properties): its "off" says nothing of the
  // machine's power, and plugpool would trust it over a Ready Node.
  if ((attributes as { assumed_state?: unknown } | undefined)?.assumed_state === true) {
    throw new PlugFailure("plug-bad-answer", "the entity's state is only assumed in Home Assistant (assumed_state): it cannot tell whether the machine has power; use a switch that reports its relay");
  }
  if (state === "on") return true;
  if (state === "off") return false;
  const told = state === "unavailable" || state === "unknown" ? state : "neither on nor off";
  throw new PlugFailure("plug-unreachable", `the entity's state is ${told} in Home Assistant`);
}

async function readWatts(api: HubApi, address: HomeAssistantEntity, sensor: string, call: Call): Promise<number> {
  const { state, attributes } = await readState(api, address, sensor, call);
  const unit = (attributes as { unit_of_measurement?: unknown } | undefined)?.unit_of_measurement;
  const factor = unit === "W" ? 1 : unit === "kW" ? 1000 : undefined;
  if (factor === undefined) throw new PlugFailure("plug-bad-answer", "its unit_of_measurement is not W (or kW)");
  const value = typeof state === "string" && /^-?\d+(\.\d+)?(e[+-]?\d+)?$/iu.test(state) ? Number(state) * factor : Number.NaN;
  if (!Number.isFinite(value)) {
    const told = state === "unavailable" || state === "unknown" ? state : "not a number";
    throw new PlugFailure("plug-bad-answer", `its state is ${told}`);
  }
  return value;
}

/** The switch's state plus the sensor's watts, or the sensor's failure (which never fails the read). */
export async function readAll(api: HubApi, address: HomeAssistantEntity, call: Call): Promise<{ on: boolean; watts?: number; sensorError?: string }> {
  const on = await readSwitch(api, address, call);
  if (address.powerSensor === undefined) return { on };
  try {
    return { on, watts: await readWatts(api, address, address.powerSensor, call) };
  } catch (error) {
    if (call.signal.aborted) throw error;
    return { on, sensorError: `sensor ${address.powerSensor}: ${describeFailure(error, call).detail}` };
  }
}

/** Home Assistant's version from GET /api/config, when it answers one that looks like a version. */
export async function readVersion(api: HubApi, address: HomeAssistantEntity, call: Call): Promise<string | undefined> {
  try {
    const answer = await api.send(address, call, "GET", "/api/config");
    const found = answer.status === 200 ? parseObject(answer.body)?.version : undefined;
    return typeof found === "string" && /^\d{4}\.\d{1,2}\.\d{1,3}(?:[a-z]{1,5}\d{0,3})?$/u.test(found) ? found : undefined;
  } catch (error) {
    if (call.signal.aborted) throw error;
    return undefined;
  }
}
