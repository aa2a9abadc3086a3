// ESPHome plugs as a power backend: a node's `plug` section, the rule that a device has one login, and the
// switch over the device's web_server REST API (https://esphome.io/web-api/).
import { formatPath, type BackendProbe, type ParsedControl, type PowerBackend, type SectionContext, type SectionPath } from "../power-backend.ts";
import { Secret } from "../secret.ts";
import { createEsphomePowerSwitch } from "./esphome-power-switch.ts";
import { parsePlugUrl, switchObjectId, type EsphomePlug, type PlugCredentials } from "./plug.ts";

const USERNAME_VARIABLE = "PLUGPOOL_PLUG_USERNAME";
const PASSWORD_VARIABLE = "PLUGPOOL_PLUG_PASSWORD";
const ENVIRONMENT = "environment";

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
  schema: SCHEMA,

  parse(section: unknown, context: SectionContext): ParsedControl<EsphomePlug> | undefined {
    const plug = section as PlugSection;
    const url = parsePlugUrl(plug.url);
    if (!url.ok) {
      context.report([...context.path, "url"], url.expected);
      return undefined;
    }
    const credentials = plug.credentials === undefined ? sharedCredentials(context.env) : ownCredentials(plug.credentials, context);
    if (credentials === null) return undefined;
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
    const first = new Map<string, { readonly files: string; readonly path: SectionPath }>();
    for (const { control, path } of controls) {
      const from = control.address.credentials?.from;
      const files = from === undefined || from === ENVIRONMENT ? "" : from;
      const seen = first.get(control.device);
      if (seen === undefined) first.set(control.device, { files, path });
      else if (seen.files !== files) {
        report(
          [...path, "credentials"],
          `differ from those of ${formatPath(seen.path)}, on the same device ${control.device}; a device has one login, so name the same files (or none) for both`,
        );
      }
    }
    const username = set(env[USERNAME_VARIABLE]);
    const password = set(env[PASSWORD_VARIABLE]);
    if ((username === undefined) !== (password === undefined)) {
      // Names the variables only: their values never go into a message.
      const [missing, present] = username === undefined ? [USERNAME_VARIABLE, PASSWORD_VARIABLE] : [PASSWORD_VARIABLE, USERNAME_VARIABLE];
      report([missing], `is not set but ${present} is; plug credentials need both variables, or neither`);
    }
  },

  create({ timeoutMs }) {
    const plugs = createEsphomePowerSwitch({
      timeoutMs,
      credentialsFor: (plug) => plug.credentials && { username: plug.credentials.username.reveal(), password: plug.credentials.password.reveal() },
    });
    return {
      read: (plug, options) => plugs.read(plug, options),
      turnOn: (plug, options) => plugs.turnOn(plug, options),
      turnOff: (plug, mayCut, options) => plugs.turnOff(plug, mayCut, options),
      async probe(plug, options): Promise<BackendProbe> {
        const p = await plugs.probe(plug, options);
        const style = p.urlStyle === "name" ? "name (ESPHome 2026.1+)" : "object_id (before 2026.1)";
        return {
          state: p.state,
          detail: `entity by ${style}; auth ${p.auth}`,
          ...(p.watts !== undefined && { watts: p.watts }),
          ...(p.sensorError !== undefined && { sensorError: p.sensorError }),
        };
      },
    };
  },
};

/** An empty variable counts as unset: `env:` entries in a manifest often default to "". */
function set(value: string | undefined): string | undefined {
  return value === "" ? undefined : value;
}

/** The pair from the environment, when both variables are set (one alone is reported by `check`). */
function sharedCredentials(env: Readonly<Record<string, string | undefined>>): PlugCredentials | undefined {
  const username = set(env[USERNAME_VARIABLE]);
  const password = set(env[PASSWORD_VARIABLE]);
  return username === undefined || password === undefined
    ? undefined
    : { username: new Secret(username), password: new Secret(password), from: ENVIRONMENT };
}

/** The plug's own pair from its files; null when a file cannot be read (reported). */
function ownCredentials(files: NonNullable<PlugSection["credentials"]>, context: SectionContext): PlugCredentials | null {
  const at = [...context.path, "credentials"];
  const username = context.secretFile(files.usernameFile, [...at, "usernameFile"]);
  const password = context.secretFile(files.passwordFile, [...at, "passwordFile"]);
  return username === undefined || password === undefined ? null : { username, password, from: `${files.usernameFile}, ${files.passwordFile}` };
}
