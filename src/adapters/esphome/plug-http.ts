// HTTP exchanges with ESPHome devices: one device at a time per slot of its queue, authenticated the way the
// device asked for (see device-auth.ts), each answer read within its bounds (see answer-body.ts), and a GET
// re-sent once when its connection was dropped under it.
import ky, { isNetworkError } from "ky";
import { mediaType, readAnswerBody } from "./answer-body.ts";
import { createDeviceAuth, type AuthScheme, type Credentials } from "./device-auth.ts";
import { createDeviceQueue } from "./device-queue.ts";
import { isDroppedConnection, PlugFailure } from "./plug-failure.ts";

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

export interface PlugRequest {
  readonly method: "GET" | "POST";
  readonly path: string;
  /**
   * Awaited right before each sending of the request is handed to fetch (a 401 makes a second one); nothing
   * else is awaited in between. A rejection sends nothing and ends the exchange with it.
   */
  readonly beforeSend?: () => Promise<void>;
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

export function createPlugHttp(opts: { fetch?: typeof fetch }): PlugHttp {
  const queue = createDeviceQueue();
  const auth = createDeviceAuth();

  // Retries have one owner per failure: this client re-sends an idempotent GET once when its connection
  // was dropped; it never re-sends a POST (switching is retried by the domain's power-off saga) and
  // never retries on status codes or timeouts. Timeouts come from the caller's deadline signal, which
  // bounds the whole call including its wait in the device queue and the reading of the body, so ky's own
  // timeouts are off.
  const api = ky.create({
    timeout: false,
    totalTimeout: false,
    throwHttpErrors: false,
    redirect: "manual",
    retry: {
      limit: 1,
      methods: ["get"],
      statusCodes: [],
      afterStatusCodes: [],
      retryOnTimeout: false,
      delay: () => 0,
      shouldRetry: ({ error }) => isNetworkError(error) && isDroppedConnection(error),
    },
    ...(opts.fetch ? { fetch: opts.fetch } : {}),
  });

  async function attempt(target: PlugTarget, request: PlugRequest, signal: AbortSignal) {
    const { method, path } = request;
    const url = new URL(target.url + path);
    const uri = url.pathname + url.search;
    const authorization = (): string | undefined => target.credentials && auth.authorization(target.device, target.credentials, method, uri);
    await request.beforeSend?.();
    const sent = target.credentials ? auth.scheme(target.device) : "none";
    const first = authorization();
    const response = await api(url, {
      method,
      signal,
      headers: first === undefined ? {} : { authorization: first },
      hooks: {
        // A Digest nonce count may be used once, so a re-sent request gets a fresh Authorization.
        beforeRetry: [({ request: again }) => {
          const header = authorization();
          if (header !== undefined) again.headers.set("authorization", header);
        }],
      },
    });
    const { text, bytes } = await readAnswerBody(response, signal, `${method} ${path}`);
    const answer: PlugAnswer = { status: response.status, body: text, contentType: mediaType(response.headers.get("content-type")), bytes };
    return { answer, sent, challenge: response.headers.get("www-authenticate") };
  }

  async function exchange(target: PlugTarget, request: PlugRequest, signal: AbortSignal): Promise<PlugAnswer> {
    for (let round = 1; round <= MAX_AUTH_ROUNDS; round++) {
      const { answer, sent, challenge } = await attempt(target, request, signal);
      if (answer.status !== 401) return answer;
      if (!target.credentials) {
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
