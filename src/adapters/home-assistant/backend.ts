// Home Assistant as a power backend: a node's `homeAssistant` section names a switch entity of a Home Assistant
// instance, switched through its REST API with a long-lived access token
// (https://developers.home-assistant.io/docs/api/rest/).
import { envValue, sectionUrl } from "../backend-section.ts";
import { normaliseDeviceUrl } from "../device-url.ts";
import { formatPath, type ParsedControl, type PowerBackend, type SectionContext, type SectionPath } from "../power-backend.ts";
import { Secret } from "../secret.ts";
import { entityDomain, type HomeAssistantEntity } from "./entity.ts";
import { createHomeAssistantSwitch } from "./home-assistant-switch.ts";

const TOKEN_VARIABLE = "PLUGPOOL_HOME_ASSISTANT_TOKEN";

/** The section as the schema accepts it. */
interface HomeAssistantSection {
  readonly url: string;
  readonly entity: string;
  readonly powerSensor?: string;
  readonly tokenFile?: string;
}

const SCHEMA = {
  description: "The Home Assistant entity that powers this machine; no two nodes may share one.",
  type: "object",
  additionalProperties: false,
  required: ["url", "entity"],
  properties: {
    url: {
      description: "Required. Base URL of the Home Assistant instance: http:// or https://, no credentials, no path, query or fragment (e.g. http://homeassistant.local:8123).",
      type: "string",
    },
    entity: {
      description: "Required. The entity id that switches the machine's power: a switch.* entity that reports its relay (e.g. switch.gpu_box), not an input_boolean.* helper.",
      type: "string",
      minLength: 1,
    },
    powerSensor: {
      description: "Optional. The entity id reporting the machine's draw in W (or kW): a sensor.* or input_number.* entity (e.g. sensor.gpu_box_power). Default: none.",
      type: "string",
      minLength: 1,
    },
    tokenFile: {
      description: `Optional. Path of a file holding a long-lived access token of a Home Assistant user (e.g. a key of a mounted Kubernetes Secret), read at start; a trailing newline is not part of it. Default: the environment variable ${TOKEN_VARIABLE}.`,
      type: "string",
      minLength: 1,
    },
  },
} as const;

export const homeAssistantBackend: PowerBackend<HomeAssistantEntity> = {
  name: "home-assistant",
  section: "homeAssistant",
  // The hub answers once the integration behind it carried the service call out, which may reach a cloud.
  defaultTimeoutMs: 4_000,
  schema: SCHEMA,

  parse(section: unknown, context: SectionContext): ParsedControl<HomeAssistantEntity> | undefined {
    const ha = section as HomeAssistantSection;
    const at = (key: string): SectionPath => [...context.path, key];
    const url = sectionUrl(normaliseDeviceUrl(ha.url, "e.g. http://homeassistant.local:8123", `put the token in tokenFile or ${TOKEN_VARIABLE} instead`), context);
    let ok = true;
    const domain = entityDomain(ha.entity, ["switch", "input_boolean"] as const);
    if (domain !== "switch") {
      // A helper's state is whatever was last set, by plugpool or anyone: its "off" would be trusted over a Ready
      // Node as "the machine has no power".
      const helper = domain === "input_boolean" ? "; an input_boolean.* helper holds what was last set, not whether the machine has power" : "";
      context.report(at("entity"), `must be the entity id of a switch.* entity (e.g. switch.gpu_box)${helper}`);
      ok = false;
    }
    if (ha.powerSensor !== undefined && entityDomain(ha.powerSensor, ["sensor", "input_number"] as const) === undefined) {
      context.report(at("powerSensor"), "must be the entity id of a sensor.* or input_number.* entity (e.g. sensor.gpu_box_power)");
      ok = false;
    }
    const token = tokenOf(ha, context);
    if (!ok || token === undefined || url === undefined) return undefined;
    return {
      key: `home-assistant ${url.device} ${ha.entity}`,
      device: url.device,
      label: `Home Assistant ${url.url} entity ${ha.entity}`,
      measuresWatts: ha.powerSensor !== undefined,
      address: {
        url: url.url,
        instance: url.device,
        entity: ha.entity,
        token,
        ...(ha.powerSensor !== undefined && { powerSensor: ha.powerSensor }),
      },
    };
  },

  check(controls, { report }) {
    // A power sensor measures one machine: two nodes reading one sensor would each be credited the other's draw.
    const first = new Map<string, SectionPath>();
    for (const { control, path } of controls) {
      const sensor = control.address.powerSensor;
      if (sensor === undefined) continue;
      const id = `${control.device} ${sensor}`;
      const seen = first.get(id);
      if (seen === undefined) first.set(id, path);
      else report([...path, "powerSensor"], `is also the power sensor of ${formatPath(seen)}; each machine needs its own`);
    }
  },

  create({ timeoutMs }) {
    return createHomeAssistantSwitch({ timeoutMs });
  },
};

// A bearer token is sent in a header: a character outside visible ASCII (a space, a newline in the middle of a
// pasted token) would make the request fail, or go as another token.
const TOKEN_SHAPE = /^[\x21-\x7e]+$/u;

/** The node's token, from its file or else the environment; undefined when there is none (reported). */
function tokenOf(section: HomeAssistantSection, context: SectionContext): Secret | undefined {
  if (section.tokenFile !== undefined) {
    const at = [...context.path, "tokenFile"];
    const token = context.secretFile(section.tokenFile, at);
    if (token === undefined) return undefined;
    if (!TOKEN_SHAPE.test(token.reveal())) {
      // Says where the token is and what is wrong with it, never any of it.
      context.report(at, `${section.tokenFile} does not hold one token: it is empty or has spaces, line breaks or other characters a token never has`);
      return undefined;
    }
    return token;
  }
  const value = envValue(context.env, TOKEN_VARIABLE);
  if (value === undefined) {
    context.report(context.path, `needs a Home Assistant token: set tokenFile, or the environment variable ${TOKEN_VARIABLE}`);
    return undefined;
  }
  if (!TOKEN_SHAPE.test(value)) {
    context.report([TOKEN_VARIABLE], "does not hold one token: it has spaces, line breaks or other characters a token never has");
    return undefined;
  }
  return new Secret(value);
}
