// HTTP exchanges with ESPHome devices: one device at a time per slot of its queue, authenticated the way the
// device asked for (see device-auth.ts), each answer read within its bounds (see plug-transport.ts), and a GET
// re-sent once when its connection was dropped under it.
import { PlugFailure } from "../http-device/device-failure.ts";
import { createDeviceQueue } from "../http-device/device-queue.ts";
import { mayResend } from "../http-device/device-request.ts";
import { createDeviceAuth, type AuthScheme, type Credentials } from "./device-auth.ts";
import { createFetchTransport, createHttpTransport, type Transport, type TransportAnswer, type TransportRequest } from "./plug-transport.ts";

export type { AuthScheme, Credentials } from "./device-auth.ts";

export interface PlugTarget {
  /** Base URL of the device. */
  readonly url: string;
  /** The physical device: the key of its queue and of what it asked for. */
  readonly device: string;
  readonly credentials: Credentials | undefined;
}

export type PlugAnswer = Omit<TransportAnswer, "challenge">;

export interface PlugRequest {
  readonly method: "GET" | "POST";
  readonly path: string;
  /**
   * Awaited right before each sending of the request is handed to the transport (a 401 makes a second one);
   * nothing else is awaited in between. A rejection sends nothing and ends the exchange with it.
   */
  readonly beforeSend?: () => Promise<void>;
  /** For an answer that never ends by itself (`/events`): read only until this holds of the body, then closed. */
  readonly until?: (body: string) => boolean;
}

/**
 * Sends one request with the device's slot held and returns any status but 401; a 401 that auth cannot answer
 * throws `plug-unauthorized`. Network failures and aborts reject with the underlying error.
 */
export type Send = (request: PlugRequest) => Promise<PlugAnswer>;

export interface PlugHttp {
  /**
   * Runs `task` once every earlier task of the device has finished (FIFO), with the device to itself. Waiting
   * ends early, and the task never runs, when `signal` aborts.
   */
  slot<T>(target: PlugTarget, signal: AbortSignal, task: (send: Send) => Promise<T>): Promise<T>;
  /** The scheme the next request to this device carries: "none" until it asked for credentials. */
  authScheme(device: string): AuthScheme;
}

const MAX_AUTH_ROUNDS = 3; // none, then what the device asked for, then Digest with a renewed (stale) nonce

/** `fetch`: tests hand one in to play the device; plugpool itself uses node:http (see plug-transport.ts). */
export function createPlugHttp(opts: { fetch?: typeof fetch }): PlugHttp {
  // At most one request in flight per ESPHome device: the IDF httpd serves one request at a time and the
  // ESP8266 stack has crashed under parallel requests (esphome/issues#5676).
  const queue = createDeviceQueue();
  const auth = createDeviceAuth();
  const transport: Transport = opts.fetch ? createFetchTransport(opts.fetch) : createHttpTransport();
  // Each device has a handful of URLs (its entities, in either spelling, and their actions), asked for at every
  // Refresh: each is parsed once, and found again by the base URL and path the caller already holds.
  const urls = new Map<string, Map<string, { readonly url: URL; readonly uri: string }>>();
  const urlOf = (base: string, path: string): { readonly url: URL; readonly uri: string } => {
    let paths = urls.get(base);
    if (paths === undefined) {
      paths = new Map();
      urls.set(base, paths);
    }
    let known = paths.get(path);
    if (known === undefined) {
      const url = new URL(base + path);
      known = { url, uri: url.pathname + url.search };
      paths.set(path, known);
    }
    return known;
  };

  // Retries have one owner per failure: this client re-sends an idempotent GET once when its connection
  // was dropped (a reused socket the device closed or purged); it never re-sends a POST (switching is
  // retried by the domain's power-off saga) and never retries on status codes or timeouts. Timeouts come
  // from the caller's deadline signal, which bounds the whole call including its wait in the device queue
  // and the reading of the body.
  async function exchange(target: PlugTarget, request: PlugRequest, signal: AbortSignal): Promise<PlugAnswer> {
    const { method, path } = request;
    const { url, uri } = urlOf(target.url, path);
    const { credentials } = target;
    for (let round = 1; round <= MAX_AUTH_ROUNDS; round++) {
      if (request.beforeSend !== undefined) await request.beforeSend();
      const sent = credentials ? auth.scheme(target.device) : "none";
      // Each sending gets a fresh Authorization: a Digest nonce count may be used once.
      const outgoing = (): TransportRequest => ({ url, method, authorization: credentials && auth.authorization(target.device, credentials, method, uri), signal, path, until: request.until });
      let answer: TransportAnswer;
      try {
        answer = await transport(outgoing());
      } catch (error) {
        if (!mayResend(method, signal, error)) throw error;
        answer = await transport(outgoing());
      }
      if (answer.status !== 401) return answer;
      const { challenge } = answer;
      if (!credentials) {
        throw new PlugFailure("plug-unauthorized", "the plug asks for credentials and none are configured", { refused: true });
      }
      const verdict = auth.challenged(target.device, sent, challenge, round > 1);
      if (verdict === "unanswerable") {
        const why = challenge === null
          ? "the plug answers 401 without saying which credentials it wants (no WWW-Authenticate)"
          : "the plug asks for credentials in a way plugpool does not answer (Digest other than MD5 or SHA-256, or Basic after it offered Digest)";
        throw new PlugFailure("plug-unauthorized", why, { refused: true });
      }
      if (verdict === "rejected") break;
    }
    throw new PlugFailure("plug-unauthorized", "the plug rejected the credentials", { refused: true });
  }

  return {
    slot: (target, signal, task) => queue.run(target.device, signal, () => task((request) => exchange(target, request, signal))),
    authScheme: (device) => auth.scheme(device),
  };
}
