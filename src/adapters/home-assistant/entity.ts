// A Home Assistant entity as its power backend knows it: which instance, which switch entity powers the machine,
// which (if any) measures its draw, and the token that reaches them.
import type { Secret } from "../secret.ts";

export interface HomeAssistantEntity {
  /** Base URL of the Home Assistant instance, normalised (the URL origin). */
  readonly url: string;
  /** The instance, however its URL is spelled (host and non-default port). */
  readonly instance: string;
  /** The switch entity that powers the machine, e.g. "switch.gpu_box". */
  readonly entity: string;
  /** A sensor (or input_number) entity reporting the machine's draw in W, when there is one. */
  readonly powerSensor?: string;
  /** A long-lived access token of a Home Assistant user; sent as a bearer token, never shown. */
  readonly token: Secret;
}

// Home Assistant's own rule for entity ids: lower-case letters, digits and single underscores, none at either
// end of the domain or the object id (valid_entity_id in
// https://github.com/home-assistant/core/blob/2025.4.4/homeassistant/core.py).
const ENTITY_ID = /^(?!.+__)(?!_)[\da-z_]+(?<!_)\.(?!_)[\da-z_]+(?<!_)$/u;

/** The domain of `text` when it is a valid entity id of one of `domains`, else undefined. */
export function entityDomain<D extends string>(text: string, domains: readonly D[]): D | undefined {
  if (!ENTITY_ID.test(text)) return undefined;
  const domain = text.slice(0, text.indexOf("."));
  return domains.find((d) => d === domain);
}
