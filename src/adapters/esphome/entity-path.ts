// Where an entity lives in the web_server URL space, and which of its two spellings a device answers to
// (https://esphome.io/web-api/; names since ESPHome 2026.1, object_id URLs removed in 2026.7).

/** How the entity is written in the URL: its configured name (2026.1+) or its object_id (≤ 2026.6). */
export type UrlStyle = "name" | "object_id";

export type EntityDomain = "switch" | "sensor";

/**
 * The object_id ESPHome derives from an entity name: lower-cased, spaces to `_`, then every character
 * outside `[a-zA-Z0-9_-]` to `_` (its `sanitize(snake_case(name))`). "Plug #1 (Kitchen)" → "plug__1__kitchen_".
 */
export function objectIdOf(name: string): string {
  return name.toLowerCase().replaceAll(" ", "_").replace(/[^a-zA-Z0-9_-]/gu, "_");
}

/**
 * The URL path of an entity, with an optional action. Names are percent-encoded as one segment:
 * both web_server backends decode `+` as a space, so a literal `+` must travel as `%2B`.
 */
export function entityPath(domain: EntityDomain, name: string, style: UrlStyle, action?: string): string {
  const segment = style === "name" ? encodeURIComponent(name) : objectIdOf(name);
  return `/${domain}/${segment}${action === undefined ? "" : `/${action}`}`;
}

/** The spellings worth trying for a name: one when both spell the same path. */
function stylesFor(name: string): readonly UrlStyle[] {
  return encodeURIComponent(name) === objectIdOf(name) ? ["name"] : ["name", "object_id"];
}

export interface UrlStyleMemory {
  /** The spellings to try, in order: the one that last worked first, else the name first. */
  order(device: string, domain: EntityDomain, name: string): readonly UrlStyle[];
  /** Records the spelling that answered for this device and entity. */
  remember(device: string, domain: EntityDomain, name: string, style: UrlStyle): void;
}

/**
 * Remembers per device and entity which spelling answered. When the remembered one starts giving 404
 * (a firmware upgrade to 2026.7 drops object_id URLs), `order` still offers the other one second.
 */
export function createUrlStyleMemory(): UrlStyleMemory {
  // The order to try, by device, domain and entity name: asked at every read, so kept rather than worked out each
  // time, and looked up by the strings the configuration already holds rather than a key built per read.
  const orders = new Map<string, Map<EntityDomain, Map<string, readonly UrlStyle[]>>>();
  const entities = (device: string, domain: EntityDomain): Map<string, readonly UrlStyle[]> | undefined => orders.get(device)?.get(domain);
  return {
    order(device, domain, name) {
      return entities(device, domain)?.get(name) ?? stylesFor(name);
    },
    remember(device, domain, name, style) {
      if (entities(device, domain)?.get(name)?.[0] === style) return;
      let byDomain = orders.get(device);
      if (byDomain === undefined) {
        byDomain = new Map();
        orders.set(device, byDomain);
      }
      let byName = byDomain.get(domain);
      if (byName === undefined) {
        byName = new Map();
        byDomain.set(domain, byName);
      }
      byName.set(name, [style, ...stylesFor(name).filter((s) => s !== style)]);
    },
  };
}
