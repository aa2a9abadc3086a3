// How web_server maps a request to an entity and an answer, by version and backend
// (https://esphome.io/web-api/). Pure: the server in index.ts does the I/O.
import type { Platform, Version } from "./auth.ts";
import type { Relay, RelayBank } from "./relays.ts";

export type Action = "turn_on" | "turn_off" | "toggle";

export type Outcome =
  | { readonly kind: "state"; readonly relay: Relay }
  | { readonly kind: "sensor"; readonly relay: Relay }
  | { readonly kind: "action"; readonly relay: Relay; readonly action: Action }
  | { readonly kind: "index" }
  /** GET /events: the Server-Sent Events stream. */
  | { readonly kind: "events" }
  /** 404 with an empty body: unknown entity or action word. */
  | { readonly kind: "not-found" }
  /** 404 `Not Found` (text/plain): a malformed path inside a known domain (2026.x). */
  | { readonly kind: "malformed" }
  /** No handler claims the path: IDF closes the socket, the async backend answers its catch-all 404. */
  | { readonly kind: "unhandled" };

/** object_id as ESPHome's codegen derives it (`sanitize(snake_case(name))`), written apart from the adapter's. */
export function emulatedObjectId(name: string): string {
  let out = "";
  for (const ch of name.toLowerCase().replaceAll(" ", "_")) out += /^[a-zA-Z0-9_-]$/.test(ch) ? ch : "_";
  return out;
}

/** Decodes a path the way both backends do: `+` is a space, then %XX (UTF-8). */
function urlDecode(raw: string): string {
  try {
    return decodeURIComponent(raw.replaceAll("+", " "));
  } catch {
    return raw;
  }
}

const ACTIONS: ReadonlySet<string> = new Set(["turn_on", "turn_off", "toggle"]);

/** Which entity a path segment names: by name (2026.1+), then by object_id (until 2026.7, with a deprecation warning). */
function findEntity(
  bank: RelayBank,
  domain: "switch" | "sensor",
  segment: string,
  version: Version,
  warn: (text: string) => void,
): Relay | undefined {
  const nameOf = (r: Relay): string | undefined => (domain === "switch" ? r.config.name : r.config.powerSensor);
  const candidates = bank.relays.filter((r) => nameOf(r) !== undefined);
  if (version !== "2025.12") {
    const byName = candidates.find((r) => nameOf(r) === segment);
    if (byName) return byName;
    if (version === "2026.7") return undefined;
  }
  const byObjectId = candidates.find((r) => emulatedObjectId(nameOf(r) ?? "") === segment);
  if (byObjectId && version === "2026.1") {
    warn(`Deprecated URL format: /${domain}/${segment} - use entity name '/${domain}/${nameOf(byObjectId) ?? ""}' instead. Object ID URLs will be removed in 2026.7.0.`);
  }
  return byObjectId;
}

/** Routes a GET or POST (other methods are refused before routing). */
export function route(
  bank: RelayBank,
  method: "GET" | "POST",
  rawPath: string,
  version: Version,
  platform: Platform,
  warn: (text: string) => void,
): Outcome {
  const path = rawPath.split("?", 1)[0] ?? "";
  if (path === "/") return { kind: "index" };
  if (path === "/events") return method === "GET" ? { kind: "events" } : { kind: "not-found" };
  const domain = path.startsWith("/switch/") ? "switch" : path.startsWith("/sensor/") ? "sensor" : undefined;
  if (!domain) return { kind: "unhandled" };
  // ≤ 2025.12 IDF matched the raw bytes; decoding arrived with name routing. The async backend always decodes.
  const decodes = version !== "2025.12" || platform === "esp8266";
  const segments = path.slice(domain.length + 2).split("/").map((s) => (decodes ? urlDecode(s) : s));

  if (version === "2025.12") {
    const [id = "", actionWord = ""] = segments;
    if (segments.length > 2) return { kind: "not-found" };
    const relay = findEntity(bank, domain, id, version, warn);
    if (!relay) return { kind: "not-found" };
    if (actionWord === "") return method === "GET" ? { kind: domain === "switch" ? "state" : "sensor", relay } : { kind: "not-found" };
    // 2024.3 – 2025.12 execute an action sent as GET as well (PR #5938).
    if (domain === "switch" && ACTIONS.has(actionWord)) return { kind: "action", relay, action: actionWord as Action };
    return { kind: "not-found" };
  }

  if (segments.some((s) => s === "") || segments.length > 3) return { kind: "malformed" };
  const [first = "", second] = segments;
  if (segments.length === 1) {
    if (method !== "GET") return { kind: "not-found" };
    const relay = findEntity(bank, domain, first, version, warn);
    if (!relay) return { kind: "not-found" };
    return { kind: domain === "switch" ? "state" : "sensor", relay };
  }
  // Two segments: GET reads sub-device/entity (the emulated device has no sub-devices), POST is entity/action.
  if (segments.length === 2 && method === "POST" && domain === "switch" && second !== undefined && ACTIONS.has(second)) {
    const relay = findEntity(bank, domain, first, version, warn);
    return relay ? { kind: "action", relay, action: second as Action } : { kind: "not-found" };
  }
  return { kind: "not-found" };
}

/** The JSON id fields of an entity for this version (`name_id` from 2026.1.3, esphome#13535). */
export function idFields(domain: "switch" | "sensor", name: string, version: Version): Record<string, string> {
  const legacy = `${domain}-${emulatedObjectId(name)}`;
  return version === "2025.12" ? { id: legacy } : { name_id: `${domain}/${name}`, id: legacy };
}
