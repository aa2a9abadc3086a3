// HTTP exchanges with a Redfish service (a server's BMC): one request at a time per BMC, over TLS that trusts the
// configured CA, authenticated with Basic or a Redfish session (X-Auth-Token), each answer read within a bound
// on size. Redfish: https://www.dmtf.org/dsp/DSP0266 (the protocol), https://www.dmtf.org/dsp/DSP8010 (schemas).
//
// Retries have one owner: this client sends a request again only after the BMC refused it with 401 while a
// session token it had kept was in use (the session expired: it logs in again, once). It never re-sends after
// a dropped connection or a timeout, since a Reset may have been carried out; switching is retried by the
// domain.
//
// No keep-alive (`connection: close`): a command written onto an idle socket the BMC had just closed would leave
// its outcome unknown (a Reset then counts as unconfirmed), and BMCs close idle connections on their own
// schedules. The Agent trusting the BMC's CA caches TLS sessions, so that a new connection resumes
// the last one's TLS session instead of a full handshake, which costs a BMC's small CPU most.
import type { KyInstance } from "ky";
import { parseObject } from "../http-device/answer.ts";
import { PlugFailure } from "../http-device/device-failure.ts";
import { createDeviceQueue } from "../http-device/device-queue.ts";
import { createHttpClient, describeOrigin, sendRequest } from "../http-device/http-client.ts";

/** A System resource is a few KB (iDRAC's, with its Oem section, under 20 KB); more is not a Redfish answer worth the memory. */
export const MAX_ANSWER_BYTES = 128 * 1024;

/** A value never shown: only `reveal()` gives it, where a request needs it. */
export interface Revealable {
  reveal(): string;
}

export interface BmcTarget {
  /** Base URL of the BMC (origin). */
  readonly url: string;
  /** The BMC: the key of its queue and its session. */
  readonly device: string;
  /** PEM of the CA the BMC's certificate must chain to; absent: the system's trust roots. */
  readonly ca?: string;
  readonly auth: "basic" | "session";
  readonly username: Revealable;
  readonly password: Revealable;
}

export interface BmcRequest {
  readonly method: "GET" | "POST";
  readonly path: string;
  readonly body?: Readonly<Record<string, unknown>>;
  /**
   * Awaited right before each sending of the request (a second one follows a session's renewal), after any
   * session login; nothing else is awaited in between. A rejection sends nothing and ends the exchange with it.
   */
  readonly beforeSend?: () => Promise<void>;
}

export interface BmcAnswer {
  readonly status: number;
  /** The JSON object of the body; undefined when there was none or it was not one. */
  readonly json: Record<string, unknown> | undefined;
  readonly bytes: number;
}

/** Sends one request with the BMC's slot held; any status but a 401 the client cannot answer is returned. */
export type Send = (request: BmcRequest) => Promise<BmcAnswer>;

export interface BmcHttp {
  /**
   * Runs `task` once every earlier task of the BMC has finished (FIFO), with the BMC to itself. Waiting ends
   * early, and the task never runs, when `signal` aborts.
   */
  slot<T>(target: BmcTarget, signal: AbortSignal, task: (send: Send) => Promise<T>): Promise<T>;
}

/** The Redfish login: POST of UserName and Password to the Sessions collection, whose URI the protocol fixes. */
export const SESSIONS_PATH = "/redfish/v1/SessionService/Sessions";

// An X-Auth-Token is an opaque visible-ASCII string (iDRAC: 32 hex digits, OpenBMC: 20 characters).
const TOKEN = /^[\x21-\x7e]{1,1024}$/u;

export function createBmcHttp(): BmcHttp {
  const queue = createDeviceQueue();
  const tokens = new Map<string, string>();

  const sessionKey = (target: BmcTarget): string => `${target.device}\n${target.username.reveal()}`;

  async function login(target: BmcTarget, signal: AbortSignal): Promise<string> {
    const body = { UserName: target.username.reveal(), Password: target.password.reveal() };
    const answer = await transport(target, { method: "POST", path: SESSIONS_PATH, body }, {}, signal);
    const where = `the session login (POST ${SESSIONS_PATH})`;
    if (answer.status === 401 || answer.status === 403) {
      // A BMC that guards every path with Basic and has no session service answers so too (sushy-emulator).
      throw new PlugFailure("plug-unauthorized", `the BMC refused ${where} with HTTP ${answer.status}: wrong credentials, or no session service (then use auth: basic)`, { refused: true });
    }
    if (answer.status === 404 || answer.status === 405 || answer.status === 501) {
      throw new PlugFailure("plug-bad-answer", `the BMC has no Redfish session service (${where} answered HTTP ${answer.status}); use auth: basic`, { refused: true });
    }
    if (answer.status >= 500) throw new PlugFailure("plug-unreachable", `${where} answered HTTP ${answer.status}`);
    const token = answer.token;
    if (answer.status < 200 || answer.status > 299 || token === undefined || !TOKEN.test(token)) {
      throw new PlugFailure("plug-bad-answer", `${where} answered HTTP ${answer.status} without an X-Auth-Token`, { refused: true });
    }
    tokens.set(sessionKey(target), token);
    return token;
  }

  async function exchange(target: BmcTarget, request: BmcRequest, signal: AbortSignal): Promise<BmcAnswer> {
    for (let round = 1; ; round++) {
      let headers: Record<string, string>;
      let kept = false;
      if (target.auth === "session") {
        const held = tokens.get(sessionKey(target));
        kept = held !== undefined;
        headers = { "x-auth-token": held ?? (await login(target, signal)) };
      } else {
        headers = { authorization: `Basic ${Buffer.from(`${target.username.reveal()}:${target.password.reveal()}`).toString("base64")}` };
      }
      await request.beforeSend?.();
      signal.throwIfAborted();
      const { status, json, bytes } = await transport(target, request, headers, signal);
      if (status !== 401) return { status, json, bytes };
      if (kept && round === 1) {
        // The session this token named has ended (timed out, or deleted on the BMC): log in again, once.
        tokens.delete(sessionKey(target));
        continue;
      }
      throw new PlugFailure("plug-unauthorized", `the BMC rejected the credentials (${request.method} ${request.path} answered HTTP 401)`, { refused: true });
    }
  }

  return {
    slot: (target, signal, task) => queue.run(target.device, signal, () => task((request) => exchange(target, request, signal))),
  };
}

interface RawAnswer extends BmcAnswer {
  readonly token: string | undefined;
}

/** The clients by the CA they trust ("": the system's trust roots). */
const clients = new Map<string, KyInstance>();

function clientFor(ca: string | undefined): KyInstance {
  let client = clients.get(ca ?? "");
  if (client === undefined) {
    client = createHttpClient({ ca });
    clients.set(ca ?? "", client);
  }
  return client;
}

/**
 * Sends one request and reads its whole answer (at most MAX_ANSWER_BYTES). Rejects with the network error, the
 * signal's reason, or `plug-bad-answer` for a larger body; redirects are answers like any other (never followed).
 */
async function transport(target: BmcTarget, request: BmcRequest, auth: Record<string, string>, signal: AbortSignal): Promise<RawAnswer> {
  const url = new URL(target.url + request.path);
  describeOrigin(url, { maxBytes: MAX_ANSWER_BYTES });
  // OData-Version: clients should send it (DSP0266, "Request headers").
  const headers = { accept: "application/json", "odata-version": "4.0", connection: "close", ...auth };
  const what = `${request.method} ${request.path}`;
  const answer = await sendRequest(clientFor(target.ca), { url, method: request.method, headers, json: request.body, signal, what });
  const token = answer.headers.get("x-auth-token");
  return { status: answer.status, json: parseObject(answer.text), bytes: answer.bytes, token: token ?? undefined };
}
