// PowerSwitch over the ESPHome web_server REST API (SPEC §8, §10; reference/esphome-web-server.md).
import { setTimeout as sleep } from "node:timers/promises";
import { PlugpoolError } from "../../domain/errors.ts";
import type { PlugAddress, PlugReading } from "../../domain/model.ts";
import type { CallOptions, PowerSwitch } from "../../domain/ports.ts";
import { createUrlStyleMemory, entityPath, type EntityDomain, type UrlStyle } from "./entity-path.ts";
import { describeFailure, PlugFailure } from "./plug-failure.ts";
import { createPlugHttp, type AuthScheme, type Credentials, type PlugHttp } from "./plug-http.ts";

/** What `doctor` prints about one plug. */
export interface PlugProbe {
  readonly state: "on" | "off";
  /** The URL spelling the device answered to: entity name (2026.1+) or object_id (older firmware). */
  readonly urlStyle: UrlStyle;
  /** The scheme that worked: "basic" also when the device does not check the Basic header it was sent. */
  readonly auth: AuthScheme;
  readonly watts?: number;
  /** Why the power sensor could not be read, when one is configured and failed. */
  readonly sensorError?: string;
}

export interface EsphomePowerSwitchOptions {
  /** Bound on each public call, including its wait behind other requests to the same device. */
  readonly timeoutMs: number;
  /** Sent as Basic up front, or as Digest once the device challenges for it. Never logged. */
  readonly credentials?: Credentials;
  readonly fetch?: typeof fetch;
}

export type EsphomePowerSwitch = PowerSwitch & {
  /** Reads the relay (and sensor) and reports how the device was reached; throws as `read` does. */
  probe(plug: PlugAddress, options?: CallOptions): Promise<PlugProbe>;
};

// After a command returns 200 (queued, not done) the relay is read back this often until it matches.
const CONFIRM_POLL_MS = 100;

interface Call {
  /** Aborts on the deadline or the caller's abort, whichever comes first. */
  readonly signal: AbortSignal;
  readonly deadline: AbortSignal;
  readonly callerSignal: AbortSignal | undefined;
}

export function createEsphomePowerSwitch(opts: EsphomePowerSwitchOptions): EsphomePowerSwitch {
  const http: PlugHttp = createPlugHttp(opts);
  const styles = createUrlStyleMemory();

  /** Runs one public call under its deadline and turns every failure into a PlugpoolError. */
  async function bounded<T>(plug: PlugAddress, action: string, options: CallOptions | undefined, work: (call: Call) => Promise<T>): Promise<T> {
    const deadline = AbortSignal.timeout(opts.timeoutMs);
    const callerSignal = options?.signal;
    const signal = callerSignal ? AbortSignal.any([callerSignal, deadline]) : deadline;
    try {
      return await work({ signal, deadline, callerSignal });
    } catch (error) {
      const { code, detail, cause } = describeFailure(error, { callerSignal, deadline, timeoutMs: opts.timeoutMs });
      throw new PlugpoolError(code, `${action} plug ${safeUrl(plug.url)} switch ${JSON.stringify(plug.switch)}: ${detail}`, { cause });
    }
  }

  /** Requests an entity by its remembered spelling, falling back to the other one on 404. */
  async function request(plug: PlugAddress, domain: EntityDomain, name: string, call: Call, action?: string) {
    const tried: string[] = [];
    for (const style of styles.order(plug.url, domain, name)) {
      const path = entityPath(domain, name, style, action);
      const answer = await http.send(plug.url, action === undefined ? "GET" : "POST", path, call.signal);
      if (answer.status === 404) {
        tried.push(path);
        continue;
      }
      if (answer.status !== 200) {
        // 5xx: the device is in trouble, worth retrying later; anything else is an answer we cannot use.
        const code = answer.status >= 500 ? "plug-unreachable" : "plug-bad-answer";
        throw new PlugFailure(code, `${action === undefined ? "GET" : "POST"} ${path} answered HTTP ${answer.status}`);
      }
      styles.remember(plug.url, domain, name, style);
      return { body: answer.body, style };
    }
    throw new PlugFailure("plug-entity-not-found", `not found (HTTP 404 for ${tried.join(" and ")})`);
  }

  async function readRelay(plug: PlugAddress, call: Call): Promise<{ on: boolean; style: UrlStyle }> {
    const { body, style } = await request(plug, "switch", plug.switch, call);
    const data = parseObject(body);
    const on = typeof data?.value === "boolean" ? data.value : data?.state === "ON" ? true : data?.state === "OFF" ? false : undefined;
    if (on === undefined) throw new PlugFailure("plug-bad-answer", `answered without a switch state: ${body.slice(0, 80)}`);
    return { on, style };
  }

  async function readWatts(plug: PlugAddress, sensor: string, call: Call): Promise<number> {
    const { body } = await request(plug, "sensor", sensor, call);
    const value = parseObject(body)?.value;
    if (typeof value !== "number" || !Number.isFinite(value)) {
      throw new PlugFailure("plug-bad-answer", `answered without a value: ${body.slice(0, 80)}`);
    }
    return value;
  }

  /** The relay reading plus the sensor's watts, or the sensor's failure (which never fails the read). */
  async function readAll(plug: PlugAddress, call: Call) {
    const relay = await readRelay(plug, call);
    if (plug.powerSensor === undefined) return { relay };
    try {
      return { relay, watts: await readWatts(plug, plug.powerSensor, call) };
    } catch (error) {
      if (call.callerSignal?.aborted === true) throw error;
      const { detail } = describeFailure(error, { callerSignal: call.callerSignal, deadline: call.deadline, timeoutMs: opts.timeoutMs });
      return { relay, sensorError: `sensor ${JSON.stringify(plug.powerSensor)}: ${detail}` };
    }
  }

  async function command(plug: PlugAddress, on: boolean, call: Call): Promise<PlugReading> {
    await request(plug, "switch", plug.switch, call, on ? "turn_on" : "turn_off");
    let lastState: boolean | undefined;
    let lastProblem = "";
    for (;;) {
      try {
        lastState = (await readRelay(plug, call)).on;
        if (lastState === on) return { on };
      } catch (error) {
        // Unreachable moments (a reboot, a dropped socket) are waited out until the deadline; a 404,
        // bad credentials or a bad answer end the wait.
        const failure = describeFailure(error, { callerSignal: call.callerSignal, deadline: call.deadline, timeoutMs: opts.timeoutMs });
        if (failure.code !== "plug-unreachable") throw error;
        if (!call.signal.aborted) lastProblem = `: ${failure.detail}`;
      }
      if (!(await pause(CONFIRM_POLL_MS, call.signal))) break;
    }
    const seen = lastState === undefined ? `no read-back succeeded${lastProblem}` : `it still reads ${lastState ? "on" : "off"}`;
    throw new PlugFailure("plug-unreachable", `state not confirmed within ${opts.timeoutMs} ms (${seen})`);
  }

  return {
    read: (plug, options) =>
      bounded(plug, "reading", options, async (call) => {
        const { relay, watts } = await readAll(plug, call);
        return watts === undefined ? { on: relay.on } : { on: relay.on, watts };
      }),
    turnOn: (plug, options) => bounded(plug, "turning on", options, (call) => command(plug, true, call)),
    turnOff: (plug, options) => bounded(plug, "turning off", options, (call) => command(plug, false, call)),
    probe: (plug, options) =>
      bounded(plug, "probing", options, async (call) => {
        const { relay, watts, sensorError } = await readAll(plug, call);
        return {
          state: relay.on ? "on" : "off",
          urlStyle: relay.style,
          auth: http.authScheme(plug.url),
          ...(watts === undefined ? {} : { watts }),
          ...(sensorError === undefined ? {} : { sensorError }),
        };
      }),
  };
}

/** Waits `ms`; false when the signal aborted first. */
async function pause(ms: number, signal: AbortSignal): Promise<boolean> {
  try {
    await sleep(ms, undefined, { signal });
    return true;
  } catch {
    return false;
  }
}

function parseObject(body: string): Record<string, unknown> | undefined {
  try {
    const data: unknown = JSON.parse(body);
    return typeof data === "object" && data !== null ? (data as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** The plug URL without any user:password part, for messages. */
function safeUrl(url: string): string {
  try {
    const parsed = new URL(url);
    parsed.username = "";
    parsed.password = "";
    return parsed.href.replace(/\/$/u, "");
  } catch {
    return "(invalid URL)";
  }
}
