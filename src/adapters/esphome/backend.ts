// ESPHome plugs as a power backend: a node's `plug` section, the rule that a device has one login, and the
// switch over the device's web_server REST API (https://esphome.io/web-api/).
import { checkOneWayPerDevice, checkVariablePair, credentialsFromEnvironment, credentialsFromFiles, FROM_ENVIRONMENT, sectionUrl } from "../backend-section.ts";
import type { BackendProbe, ParsedControl, PowerBackend, SectionContext } from "../power-backend.ts";
import { createEsphomePowerSwitch } from "./esphome-power-switch.ts";
import { parsePlugUrl, switchObjectId, type EsphomePlug } from "./plug.ts";

const USERNAME_VARIABLE = "PLUGPOOL_PLUG_USERNAME";
const PASSWORD_VARIABLE = "PLUGPOOL_PLUG_PASSWORD";

/** The section as the schema accepts it. */
interface PlugSection {
  readonly url: string;
  readonly switch: string;
  readonly powerSensor?: string;
  readonly credentials?: { readonly usernameFile: string; readonly passwordFile: string };
}

const SCHEMA = {
  description: "The ESPHome plug relay that powers this machine; no two nodes may share one.",
  type: "object",
  additionalProperties: false,
  required: ["url", "switch"],
  properties: {
    url: {
      description:
        "Required. Base URL of the ESPHome device's web_server: http:// or https://, no credentials, no path, query or fragment (a trailing / is fine).",
      type: "string",
    },
    switch: {
      description: "Required. The name of the relay's switch entity as configured in ESPHome (e.g. Relay).",
      type: "string",
      minLength: 1,
    },
    powerSensor: {
      description: "Optional. The name of the ESPHome sensor entity reporting the plug's power draw in watts (e.g. Power). Default: none.",
      type: "string",
      minLength: 1,
    },
    credentials: {
      description:
        "Optional. This plug's own web_server credentials, each in a file (e.g. the keys of a mounted Kubernetes Secret), read at start; a trailing newline is not part of the value. Every plug of one device must name the same files. Default: PLUGPOOL_PLUG_USERNAME and PLUGPOOL_PLUG_PASSWORD.",
      type: "object",
      additionalProperties: false,
      required: ["usernameFile", "passwordFile"],
      properties: {
        usernameFile: { description: "Required. Path of the file holding the username.", type: "string", minLength: 1 },
        passwordFile: { description: "Required. Path of the file holding the password.", type: "string", minLength: 1 },
      },
    },
  },
} as const;

export const esphomeBackend: PowerBackend<EsphomePlug> = {
  name: "esphome",
  section: "plug",
  defaultTimeoutMs: 2_000,
  schema: SCHEMA,

  parse(section: unknown, context: SectionContext): ParsedControl<EsphomePlug> | undefined {
    const plug = section as PlugSection;
    const url = sectionUrl(parsePlugUrl(plug.url), context);
    if (url === undefined) return undefined;
    const credentials = plug.credentials === undefined
      ? credentialsFromEnvironment(context.env, USERNAME_VARIABLE, PASSWORD_VARIABLE)
      : credentialsFromFiles(plug.credentials, [...context.path, "credentials"], context);
    // Files named but unreadable were reported: no falling back to the environment's pair.
    if (credentials === undefined && plug.credentials !== undefined) return undefined;
    const address: EsphomePlug = {
      url: url.url,
      device: url.device,
      switch: plug.switch,
      ...(plug.powerSensor !== undefined && { powerSensor: plug.powerSensor }),
      ...(credentials !== undefined && { credentials }),
    };
    return {
      // Firmware before 2026.1 addresses entities by object_id: two names with one object_id are one relay.
      key: `esphome ${url.device} ${switchObjectId(plug.switch)}`,
      device: url.device,
      label: `plug ${url.url} switch ${JSON.stringify(plug.switch)}`,
      measuresWatts: plug.powerSensor !== undefined,
      address,
    };
  },

  check(controls, { report, env }) {
    // A device has one web_server login: every plug on it must name the same credentials files, or none.
    const files = (plug: EsphomePlug): string => {
      const from = plug.credentials?.from;
      return from === undefined || from === FROM_ENVIRONMENT ? "" : from;
    };
    checkOneWayPerDevice(controls, files, (path, first, device) => {
      report([...path, "credentials"], `differ from those of ${first}, on the same device ${device}; a device has one login, so name the same files (or none) for both`);
    });
    checkVariablePair(env, report, USERNAME_VARIABLE, PASSWORD_VARIABLE, "plug credentials");
  },

  create({ timeoutMs }) {
    const plugs = createEsphomePowerSwitch({
      timeoutMs,
      credentialsFor: (plug) => plug.credentials && { username: plug.credentials.username.reveal(), password: plug.credentials.password.reveal() },
    });
    return {
      ...plugs,
      async probe(plug, options): Promise<BackendProbe> {
        const p = await plugs.probe(plug, options);
        const style = p.urlStyle === "name" ? "name (ESPHome 2026.1+)" : "object_id (before 2026.1)";
        return {
          state: p.state,
          detail: `entity by ${style}; auth ${p.auth}`,
          identity: p.identity,
          ...(p.watts !== undefined && { watts: p.watts }),
          ...(p.sensorError !== undefined && { sensorError: p.sensorError }),
        };
      },
    };
  },
};
