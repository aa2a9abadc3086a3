// One HTTP exchange with one ESPHome device: queued behind that device's other requests, authenticated
// the way the device wants (preemptive Basic, Digest when challenged), and retried once when a GET's
// connection was dropped under it.
import ky, { isNetworkError } from "ky";
import { createDeviceQueue } from "./device-queue.ts";
import { createDigestSession, parseDigestChallenge, type DigestSession } from "./digest-auth.ts";
import { isDroppedConnection, PlugFailure } from "./plug-failure.ts";

export type AuthScheme = "none" | "basic" | "digest";

export interface Credentials {
  readonly username: string;
  readonly password: string;
}

export interface PlugAnswer {
  readonly status: number;
  readonly body: string;
}

export interface PlugHttp {
  /**
   * Sends one request and returns any status except 401; a 401 that auth cannot answer throws
   * `plug-unauthorized`. Network failures and aborts reject with the underlying error.
   */
  send(device: string, method: "GET" | "POST", path: string, signal: AbortSignal): Promise<PlugAnswer>;
  /** The scheme that last worked with this device ("none" without credentials). */
  authScheme(device: string): AuthScheme;
}

const MAX_AUTH_ROUNDS = 3; // Basic, then Digest, then Digest with a renewed (stale) nonce

export function createPlugHttp(opts: { credentials?: Credentials; fetch?: typeof fetch }): PlugHttp {
  const { credentials } = opts;
  const basic = credentials && `Basic ${Buffer.from(`${credentials.username}:${credentials.password}`, "utf8").toString("base64")}`;
  const queue = createDeviceQueue();
  const digests = new Map<string, DigestSession>();
  const schemes = new Map<string, AuthScheme>();

  // Retries have one owner per failure: this client re-sends an idempotent GET once when its connection
  // was dropped; it never re-sends a POST (switching is retried by the domain's power-off saga) and
  // never retries on status codes or timeouts. Timeouts come from the caller's deadline signal, which
  // bounds the whole call including its wait in the device queue, so ky's own timeouts are off.
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

  function authorization(device: string, method: string, uri: string): string | undefined {
    if (!credentials) return undefined;
    return digests.get(device)?.authorization(credentials, method, uri) ?? basic;
  }

  async function attempt(device: string, method: string, url: URL, signal: AbortSignal) {
    const uri = url.pathname + url.search;
    const first = authorization(device, method, uri);
    const response = await api(url, {
      method,
      signal,
      headers: first === undefined ? {} : { authorization: first },
      hooks: {
        // A Digest nonce count may be used once, so a re-sent request gets a fresh Authorization.
        beforeRetry: [({ request }) => {
          const again = authorization(device, method, uri);
          if (again !== undefined) request.headers.set("authorization", again);
        }],
      },
    });
    return { status: response.status, body: await response.text(), challenge: response.headers.get("www-authenticate") };
  }

  async function exchange(device: string, method: "GET" | "POST", path: string, signal: AbortSignal): Promise<PlugAnswer> {
    const url = new URL(device + path);
    let freshNonce = false;
    for (let round = 1; ; round++) {
      const sentDigest = credentials !== undefined && digests.has(device);
      const answer = await attempt(device, method, url, signal);
      if (answer.status !== 401) {
        schemes.set(device, sentDigest ? "digest" : credentials ? "basic" : "none");
        return answer;
      }
      if (!credentials) throw new PlugFailure("plug-unauthorized", "the plug asks for credentials and none are configured");
      if (round === MAX_AUTH_ROUNDS) break;
      const challenge = parseDigestChallenge(answer.challenge);
      if (challenge && (!sentDigest || challenge.stale || !freshNonce)) {
        digests.set(device, createDigestSession(challenge));
        freshNonce = true;
      } else if (!challenge && sentDigest) {
        digests.delete(device); // the device no longer asks for Digest (reflashed with Basic)
      } else {
        break;
      }
    }
    throw new PlugFailure("plug-unauthorized", "the plug rejected the credentials");
  }

  return {
    send: (device, method, path, signal) => queue.run(device, signal, () => exchange(device, method, path, signal)),
    authScheme: (device) => schemes.get(device) ?? (credentials ? "basic" : "none"),
  };
}
