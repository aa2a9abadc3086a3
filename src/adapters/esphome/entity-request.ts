// Requests to a plug's entities in whichever URL spelling its device answers to (see entity-path.ts), and what an
// answer other than 200 says about the request.
import { sizeOf } from "../http-device/answer.ts";
import { PlugFailure } from "../http-device/device-failure.ts";
import { createUrlStyleMemory, entityPath, type EntityDomain, type UrlStyle } from "./entity-path.ts";
import type { EsphomePlug } from "./plug.ts";
import type { PlugAnswer, PlugRequest, Send } from "./plug-http.ts";

// Statuses with which a device says it did not carry a request out: bad or oversized request (400, 413, 414,
// 431), credentials (401), origin check (403), no such entity or action (404), method (405), no
// Content-Length (411). After any other answer, or none, a command sent may have been carried out.
const REFUSALS: ReadonlySet<number> = new Set([400, 401, 403, 404, 405, 411, 413, 414, 431]);

/** A 200 answer, with the path and spelling that got it. */
export interface EntityAnswer {
  readonly answer: PlugAnswer;
  readonly path: string;
  readonly style: UrlStyle;
}

export interface EntityRequests {
  /**
   * Requests an entity by its remembered spelling, falling back to the other one on 404: a GET without `action`,
   * else a POST of the action with `beforeSend`.
   */
  request(send: Send, plug: EsphomePlug, domain: EntityDomain, name: string, action?: string, beforeSend?: () => Promise<void>): Promise<EntityAnswer>;
}

export function createEntityRequests(): EntityRequests {
  const styles = createUrlStyleMemory();

  // The read of each entity of a plug in each spelling, made once per plug: a Refresh reads every plug. Kept by
  // domain, then name: a switch and a sensor may have the same name.
  const reads = new WeakMap<EsphomePlug, Map<EntityDomain, Map<string, Readonly<Record<UrlStyle, PlugRequest>>>>>();
  function readOf(plug: EsphomePlug, domain: EntityDomain, name: string, style: UrlStyle): PlugRequest {
    let byDomain = reads.get(plug);
    if (byDomain === undefined) {
      byDomain = new Map();
      reads.set(plug, byDomain);
    }
    let byName = byDomain.get(domain);
    if (byName === undefined) {
      byName = new Map();
      byDomain.set(domain, byName);
    }
    let bySpelling = byName.get(name);
    if (bySpelling === undefined) {
      const read = (spelling: UrlStyle): PlugRequest => ({ method: "GET", path: entityPath(domain, name, spelling) });
      byName.set(name, (bySpelling = { name: read("name"), object_id: read("object_id") }));
    }
    return bySpelling[style];
  }

  async function request(send: Send, plug: EsphomePlug, domain: EntityDomain, name: string, action?: string, beforeSend?: () => Promise<void>) {
    let tried = "";
    for (const style of styles.order(plug.device, domain, name)) {
      const sent = action === undefined ? readOf(plug, domain, name, style) : { method: "POST" as const, path: entityPath(domain, name, style, action), beforeSend };
      const { method, path } = sent;
      const answer = await send(sent);
      if (answer.status === 404) {
        tried += tried === "" ? path : ` and ${path}`;
        continue;
      }
      if (answer.status !== 200) {
        // 5xx: the device is in trouble, worth retrying later; anything else is an answer we cannot use.
        const code = answer.status >= 500 ? "plug-unreachable" : "plug-bad-answer";
        throw new PlugFailure(code, `${method} ${path} answered HTTP ${answer.status} ${sizeOf(answer)}`, { refused: REFUSALS.has(answer.status) });
      }
      styles.remember(plug.device, domain, name, style);
      return { answer, path, style };
    }
    throw new PlugFailure("plug-entity-not-found", `not found (HTTP 404 for ${tried})`, { refused: true });
  }

  return { request };
}
