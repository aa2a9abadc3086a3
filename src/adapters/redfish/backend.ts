// Servers' BMCs as a power backend over Redfish (https://www.dmtf.org/standards/redfish): a node's `redfish`
// section, the rule that a BMC is reached one way, and the switch over its ComputerSystem.
import { X509Certificate } from "node:crypto";
import { checkOneWayPerDevice, checkVariablePair, credentialsFromEnvironment, credentialsFromFiles, envValue, sectionUrl, type SecretCredentials } from "../backend-section.ts";
import type { BackendOptions, BackendProbe, BackendSwitch, ParsedControl, PowerBackend, SectionContext } from "../power-backend.ts";
import { createRedfishPowerSwitch, labelOf, type RedfishPowerSwitch } from "./redfish-power-switch.ts";
import { parseBmcUrl, type RedfishSystem } from "./redfish-system.ts";

const USERNAME_VARIABLE = "PLUGPOOL_REDFISH_USERNAME";
const PASSWORD_VARIABLE = "PLUGPOOL_REDFISH_PASSWORD";

/** The section as the schema accepts it. */
interface RedfishSection {
  readonly url: string;
  readonly system: string;
  readonly auth?: "basic" | "session";
  readonly caFile?: string;
  readonly usernameFile?: string;
  readonly passwordFile?: string;
  readonly gracefulShutdown?: boolean;
}

const SCHEMA = {
  description: "The Redfish service (the server's BMC) and the ComputerSystem on it that this machine is; no two nodes may share one.",
  type: "object",
  additionalProperties: false,
  required: ["url", "system"],
  properties: {
    url: {
      description:
        "Required. Base URL of the BMC: https://, no credentials, no path, query or fragment (e.g. https://10.0.0.5). http:// only to a loopback address (a local tunnel).",
      type: "string",
    },
    system: {
      description: "Required. The system's Id, the last segment of its URI as /redfish/v1/Systems lists it (e.g. 1, System.Embedded.1).",
      type: "string",
      minLength: 1,
      maxLength: 256,
    },
    auth: {
      description:
        "Optional. basic: the credentials on every request. session: one login (POST /redfish/v1/SessionService/Sessions), then its X-Auth-Token, logging in again when the BMC ends the session. Default basic.",
      enum: ["basic", "session"],
      default: "basic",
    },
    caFile: {
      description: "Optional. PEM file of the CA (or the self-signed certificate) the BMC's certificate must chain to, read at start. Default: the system's trust roots.",
      type: "string",
      minLength: 1,
    },
    usernameFile: {
      description:
        "Optional, with passwordFile. File holding the BMC account's username (e.g. a key of a mounted Kubernetes Secret), read at start; a trailing newline is not part of the value. Default: PLUGPOOL_REDFISH_USERNAME.",
      type: "string",
      minLength: 1,
    },
    passwordFile: {
      description: "Optional, with usernameFile. File holding that account's password, read at start. Default: PLUGPOOL_REDFISH_PASSWORD.",
      type: "string",
      minLength: 1,
    },
    gracefulShutdown: {
      description:
        "Optional. true: a power-off asks the BMC to shut the OS down (Reset GracefulShutdown, an ACPI power-button press the OS must act on) instead of creating the power-off pod; the cut after it is ForceOff as ever. Default false.",
      type: "boolean",
      default: false,
    },
  },
} as const;

/** The backend's switch: it can always ask for a graceful shutdown, whether a node's section wants it or not. */
export type RedfishBackendSwitch = BackendSwitch<RedfishSystem> & Pick<RedfishPowerSwitch, "shutdown">;

export interface RedfishBackend extends PowerBackend<RedfishSystem> {
  create(options: BackendOptions): RedfishBackendSwitch;
}

export const redfishBackend: RedfishBackend = {
  name: "redfish",
  section: "redfish",
  // A BMC takes seconds to move the System to On and say so.
  defaultTimeoutMs: 10_000,
  schema: SCHEMA,

  parse(section: unknown, context: SectionContext): ParsedControl<RedfishSystem> | undefined {
    const config = section as RedfishSection;
    const url = sectionUrl(parseBmcUrl(config.url), context);
    const ca = config.caFile === undefined ? undefined : readCa(config.caFile, url?.url.startsWith("http:") === true, context);
    const credentials = readCredentials(config, context);
    if (url === undefined || ca === null || credentials === undefined) return undefined;
    const system: RedfishSystem = {
      url: url.url,
      device: url.device,
      system: config.system,
      auth: config.auth ?? "basic",
      ...(ca !== undefined && { ca }),
      credentials,
    };
    return {
      key: `redfish ${url.device} ${JSON.stringify(config.system)}`,
      device: url.device,
      label: labelOf(system),
      measuresWatts: false,
      ...(config.gracefulShutdown === true && { shutsDown: true }),
      address: system,
    };
  },

  check(controls, { report, env }) {
    // One BMC has one certificate and is logged in to once: every system on it names the same CA file, auth
    // and credentials files (or none).
    const way = ({ auth, ca, credentials }: RedfishSystem): string => JSON.stringify([auth, ca?.file ?? "", credentials.from]);
    checkOneWayPerDevice(controls, way, (path, first, device) => {
      report(path, `reaches BMC ${device} differently from ${first} (auth, caFile or credentials files); a BMC is reached one way, so name the same for both`);
    });
    checkVariablePair(env, report, USERNAME_VARIABLE, PASSWORD_VARIABLE, "Redfish credentials");
  },

  create({ timeoutMs }) {
    const systems = createRedfishPowerSwitch({ timeoutMs });
    return {
      ...systems,
      async probe(system, options): Promise<BackendProbe> {
        const p = await systems.probe(system, options);
        const versions = [
          `Redfish ${p.redfishVersion ?? "version not shown"}`,
          `BMC firmware ${p.firmwareVersion ?? "not shown"}`,
          `PowerState ${p.powerState}`,
          `${system.auth} auth`,
          system.url.startsWith("http:") ? "plain http (loopback)" : system.ca === undefined ? "TLS trusting the system's CAs" : `TLS trusting ${system.ca.file}`,
        ];
        return { state: p.state, detail: versions.join("; "), identity: p.identity };
      },
    };
  },
};

/** The CA file's PEM; null when it cannot be used (reported). */
function readCa(file: string, plainHttp: boolean, context: SectionContext): RedfishSystem["ca"] | null {
  const at = [...context.path, "caFile"];
  if (plainHttp) {
    context.report(at, "has no use with an http:// URL; use https://");
    return null;
  }
  const pem = context.secretFile(file, at)?.reveal();
  if (pem === undefined) return null;
  try {
    // Parses the first certificate of the file: a file without one is a mistake worth saying at start.
    new X509Certificate(pem);
  } catch {
    context.report(at, `${file} holds no PEM certificate (-----BEGIN CERTIFICATE-----)`);
    return null;
  }
  return { file, pem };
}

/** The section's files, else the environment's pair; undefined when neither is there or a file is unreadable (reported). */
function readCredentials(config: RedfishSection, context: SectionContext): SecretCredentials | undefined {
  const { usernameFile, passwordFile } = config;
  if (usernameFile !== undefined && passwordFile !== undefined) return credentialsFromFiles({ usernameFile, passwordFile }, context.path, context);
  if (usernameFile !== undefined || passwordFile !== undefined) {
    const [given, missing] = usernameFile === undefined ? ["passwordFile", "usernameFile"] : ["usernameFile", "passwordFile"];
    context.report([...context.path, missing], `is missing: ${given} is set, and a BMC login needs both files (or neither, for ${USERNAME_VARIABLE} and ${PASSWORD_VARIABLE})`);
    return undefined;
  }
  // Neither variable set: no login at all. One without the other is reported once, by `check`.
  if (envValue(context.env, USERNAME_VARIABLE) === undefined && envValue(context.env, PASSWORD_VARIABLE) === undefined) {
    context.report(context.path, `has no credentials: a BMC needs a login; set usernameFile and passwordFile, or ${USERNAME_VARIABLE} and ${PASSWORD_VARIABLE}`);
  }
  return credentialsFromEnvironment(context.env, USERNAME_VARIABLE, PASSWORD_VARIABLE);
}
