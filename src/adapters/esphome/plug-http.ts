// HTTP exchanges with ESPHome devices: one device at a time per slot of its queue, authenticated the way the
// device asked for (see device-auth.ts), each answer read within its bounds (see ../http-device/http-client.ts),
// and a GET re-sent once when its connection was dropped under it.
//
// One connection per device, kept between Refreshes: requests to a device are serialised by the device queue
// anyway, and ESPHome devices accept only a handful of sockets (https://github.com/esphome/esphome/pull/14067).
// ESP-IDF keeps idle sockets open and may purge one when it runs short
// (https://github.com/esphome/esphome/pull/12481), which the GET resend covers; ESP8266 devices close after
// each answer.
import { mediaType } from "../http-device/answer.ts";
import { PlugFailure } from "../http-device/device-failure.ts";
import { createDeviceQueue } from "../http-device/device-queue.ts";
import { createHttpClient, describeOrigin, resendDroppedGet, sendRequest, type HttpAnswer } from "../http-device/http-client.ts";
import { createDeviceAuth, type AuthScheme, type Credentials } from "./device-auth.ts";

export type { AuthScheme, Credentials } from "./device-auth.ts";

export interface PlugTarget {
  /** Base URL of the device. */
  readonly url: string;
  /** The physical device: the key of its queue and of what it asked for. */
  readonly device: string;
  readonly credentials: Credentials | undefined;
}

export interface PlugAnswer {
  readonly status: number;
  readonly body: string;
  /** The declared media type when it looks like one, else "" (see `mediaType`). */
  readonly contentType: string;
  readonly bytes: number;
}

/** ESPHome answers are about 100 bytes; anything much larger is not a web_server answer (a captive portal, a proxy). */
export const MAX_ANSWER_BYTES = 4096;

export interface PlugRequest {
  readonly method: "GET" | "POST";
  readonly path: string;
  /**
   * Awaited right before each sending of the request is handed to the HTTP client (a 401 makes a second one);
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

/** `fetch`: tests hand one in to play the device; plugpool itself uses the shared Agent. */
export function createPlugHttp(opts: { fetch?: typeof fetch }): PlugHttp {
  // At most one request in flight per ESPHome device: the IDF httpd serves one request at a time and the
  // ESP8266 stack has crashed under parallel requests (esphome/issues#5676).
  const queue = createDeviceQueue();
  const auth = createDeviceAuth();
  const client = createHttpClient({ fetch: opts.fetch });
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
      if (paths.size === 0) describeOrigin(url, { maxBytes: MAX_ANSWER_BYTES });
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
      const send = (): Promise<HttpAnswer> => {
        const authorization = credentials && auth.authorization(target.device, credentials, method, uri);
        return sendRequest(client, { url, method, signal, what: `${method} ${path}`, until: request.until, ...(authorization !== undefined && { headers: { authorization } }) });
      };
      const answer = await resendDroppedGet(method, signal, send);
      if (answer.status !== 401) return { status: answer.status, body: answer.text, contentType: mediaType(answer.headers.get("content-type")), bytes: answer.bytes };
      const challenge = answer.headers.get("www-authenticate");
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
