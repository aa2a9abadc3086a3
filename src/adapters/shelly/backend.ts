// Shelly Gen2+ switches (Plus, Pro, Gen3, Gen4) as a power backend: a node's `shelly` section, the rule that a
// device has one password, and the switch over the device's local RPC
// (https://shelly-api-docs.shelly.cloud/gen2/ComponentsAndServices/Switch).
import { checkOneWayPerDevice, envValue, sectionUrl } from "../backend-section.ts";
import { normaliseDeviceUrl } from "../device-url.ts";
import type { BackendProbe, ParsedControl, PowerBackend } from "../power-backend.ts";
import { Secret } from "../secret.ts";
import { createShellyPowerSwitch, type ShellyAddress } from "./shelly-power-switch.ts";

const PASSWORD_VARIABLE = "PLUGPOOL_SHELLY_PASSWORD";

/** The section as the schema accepts it, defaults filled in. */
interface ShellySection {
  readonly url: string;
  readonly switchId: number;
  readonly measure: boolean;
  readonly passwordFile?: string;
}

const SCHEMA = {
  description:
    "The output (Switch component) of a Shelly Gen2+ device (Plus, Pro, Gen3, Gen4) that powers this machine, driven over the device's local RPC; no two nodes may share one.",
  type: "object",
  additionalProperties: false,
  required: ["url"],
  properties: {
    url: {
      description: "Required. Base URL of the Shelly device: http:// or https://, no credentials, no path, query or fragment (a trailing / is fine).",
      type: "string",
    },
    switchId: {
      description: "Optional. The id of the Switch component: 0 on a plug or single relay, 0 to 3 on a Pro 4PM. Default 0.",
      type: "integer",
      minimum: 0,
      maximum: 255,
      default: 0,
    },
    measure: {
      description: "Optional. Report the output's apower (the power meter of the PM models and plugs) as the machine's draw in watts. Default false.",
      type: "boolean",
      default: false,
    },
    passwordFile: {
      description:
        "Optional. Path of a file holding the device's password (user admin), e.g. a key of a mounted Kubernetes Secret, read at start; a trailing newline is not part of it. Every switch of one device must name the same file. Default: PLUGPOOL_SHELLY_PASSWORD when set, else no password.",
      type: "string",
      minLength: 1,
    },
  },
} as const;

export const shellyBackend: PowerBackend<ShellyAddress> = {
  name: "shelly",
  section: "shelly",
  defaultTimeoutMs: 2_000,
  schema: SCHEMA,

  parse(section, context): ParsedControl<ShellyAddress> | undefined {
    const shelly = section as ShellySection;
    const url = sectionUrl(normaliseDeviceUrl(shelly.url, "e.g. http://192.168.1.52", `set passwordFile or ${PASSWORD_VARIABLE} instead`), context);
    if (url === undefined) return undefined;
    let password: Secret | undefined;
    if (shelly.passwordFile !== undefined) {
      password = context.secretFile(shelly.passwordFile, [...context.path, "passwordFile"]);
      if (password === undefined) return undefined;
    } else {
      const shared = envValue(context.env, PASSWORD_VARIABLE);
      if (shared !== undefined) password = new Secret(shared);
    }
    const address: ShellyAddress = {
      url: url.url,
      device: url.device,
      switchId: shelly.switchId,
      measure: shelly.measure,
      ...(password !== undefined && { password }),
      ...(shelly.passwordFile !== undefined && { passwordFile: shelly.passwordFile }),
    };
    return {
      key: `shelly ${url.device} ${shelly.switchId}`,
      device: url.device,
      label: `Shelly ${url.url} switch ${shelly.switchId}`,
      measuresWatts: shelly.measure,
      address,
    };
  },

  check(controls, { report }) {
    // A device has one password: every switch on it must name the same file, or none.
    checkOneWayPerDevice(controls, (address) => address.passwordFile ?? "", (path, first, device) => {
      report([...path, "passwordFile"], `differs from that of ${first}, on the same device ${device}; a device has one password, so name the same file (or none) for both`);
    });
  },

  create({ timeoutMs }) {
    const shellies = createShellyPowerSwitch({ timeoutMs });
    return {
      ...shellies,
      async probe(address, options): Promise<BackendProbe> {
        const p = await shellies.probe(address, options);
        const device = [p.gen === undefined ? "Gen2+" : `Gen${p.gen}`, p.model, p.firmware === undefined ? undefined : `firmware ${p.firmware}`];
        return {
          state: p.state,
          detail: `${device.filter((part) => part !== undefined).join(" ")}; auth ${p.auth}`,
          identity: p.identity,
          ...(p.watts !== undefined && { watts: p.watts }),
          ...(p.sensorError !== undefined && { sensorError: p.sensorError }),
        };
      },
    };
  },
};
