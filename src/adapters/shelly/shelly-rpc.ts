// JSON-RPC 2.0 calls to Shelly Gen2+ devices over HTTP (`POST /rpc`, one frame per request:
// https://shelly-api-docs.shelly.cloud/gen2/General/RPCProtocol), one call at a time per device, each answer
// read within a bound on size, and Digest auth answered as the device asks
// (https://shelly-api-docs.shelly.cloud/gen2/General/Authentication): RFC 7616 with SHA-256 only, qop "auth", the
// realm is the device id and the user is always "admin". Firmware 2.0 and later take one nonce for many requests
// with an increasing nc; older firmware wants a new challenge per request, which a reused nonce simply gets (one
// more round trip), so the client always tries the nonce it holds first.
//
// Retries have one owner: this client sends a request again only after the device refused it for its
// credentials (401); it never re-sends after a dropped connection or a timeout, since a Switch.Set may have
// been carried out. Switching is retried by the domain.
import { isObject, parseObject } from "../http-device/answer.ts";
import { PlugFailure } from "../http-device/device-failure.ts";
import { createDeviceQueue } from "../http-device/device-queue.ts";
import { createDigestSession, parseDigestChallenge, type DigestSession } from "../http-device/digest-auth.ts";
import { createHttpClient, describeOrigin, sendRequest } from "../http-device/http-client.ts";
import type { Secret } from "../secret.ts";

/** Shelly answers are a few hundred bytes (Switch.GetStatus, Shelly.GetDeviceInfo); more is not worth the memory. */
const MAX_ANSWER_BYTES = 4096;

const SHELLY_USERNAME = "admin";

export interface RpcTarget {
  /** Base URL of the device (no trailing slash). */
  readonly url: string;
  /** The device's queue key. */
  readonly device: string;
  /** The device's password (user "admin"), used only once the device asked for credentials; never logged. */
  readonly password: Secret | undefined;
}

export interface RpcRequest {
  readonly method: string;
  readonly params: Readonly<Record<string, unknown>>;
  /**
   * Awaited right before each sending (a 401 makes another), with the device's slot held; nothing else is
   * awaited in between. It may call the device itself through `inSlot`, in the same slot. A rejection sends
   * nothing and ends the call with it.
   */
  readonly beforeSend?: (inSlot: InSlot) => Promise<void>;
}

/** A call made with the device's slot already held: its result, as `ShellyRpc.call` gives it. */
export type InSlot = (request: Omit<RpcRequest, "beforeSend">) => Promise<unknown>;

export interface ShellyRpc {
  /** The call's result, once every earlier call to the device has finished. Rejects with PlugFailure, a network error or the signal's reason. */
  call(target: RpcTarget, request: RpcRequest, signal: AbortSignal): Promise<unknown>;
  /** Whether the device has asked this client for credentials. */
  authAsked(device: string): boolean;
}

interface Answer {
  readonly status: number;
  readonly body: string;
  readonly challenge: string | null;
}

const MAX_AUTH_ROUNDS = 3; // none, then the challenge's nonce, then a new nonce after an old one was refused

const client = createHttpClient();

/** One POST of one frame and its whole answer (at most MAX_ANSWER_BYTES). */
async function post(url: URL, frame: Readonly<Record<string, unknown>>, authorization: string | undefined, signal: AbortSignal): Promise<Answer> {
  // `connection: close`: the device closes every connection after its answer, and a command is never written
  // onto a kept socket the device may have closed meanwhile.
  const headers: Record<string, string> = authorization === undefined ? { connection: "close" } : { connection: "close", authorization };
  const answer = await sendRequest(client, { url, method: "POST", headers, json: frame, signal, what: "POST /rpc" });
  return { status: answer.status, body: answer.text, challenge: answer.headers.get("www-authenticate") };
}

/** An RPC error code fit for a message: a small integer, as Shelly's are (-103, -105, 404…). */
function errorCode(value: unknown): string {
  return typeof value === "number" && Number.isInteger(value) && Math.abs(value) < 100_000 ? String(value) : "without a code";
}

/** The result of a frame answered to call `id`, or the PlugFailure it stands for. */
function resultOf(answer: Answer, id: number, method: string): unknown {
  const frame = parseObject(answer.body);
  if (frame !== undefined && isObject(frame.error)) {
    // An error frame: the method ran and failed, or never ran; either way the device did not act.
    const code = frame.error.code;
    const what = `${method} answered RPC error ${errorCode(code)}`;
    if (code === -105) throw new PlugFailure("plug-entity-not-found", `${what} (no such switch id on the device)`, { refused: true });
    if (code === 404) throw new PlugFailure("plug-entity-not-found", `${what} (the device has no such method: not a Shelly Gen2+ switch)`, { refused: true });
    if (code === 401) throw new PlugFailure("plug-unauthorized", `${what} (unauthenticated)`, { refused: true });
    throw new PlugFailure("plug-bad-answer", what, { refused: true });
  }
  if (answer.status >= 500) throw new PlugFailure("plug-unreachable", `${method} answered HTTP ${answer.status}`);
  if (answer.status !== 200) throw new PlugFailure("plug-bad-answer", `${method} answered HTTP ${answer.status}`, { refused: answer.status >= 400 });
  if (frame === undefined || frame.id !== id || !("result" in frame)) {
    throw new PlugFailure("plug-bad-answer", `${method} answered without a JSON-RPC result (${answer.body.length} bytes)`);
  }
  return frame.result;
}

export function createShellyRpc(): ShellyRpc {
  const queue = createDeviceQueue();
  const sessions = new Map<string, DigestSession>();
  const asked = new Set<string>();
  let nextId = 1;

  async function exchange(target: RpcTarget, request: RpcRequest, signal: AbortSignal): Promise<unknown> {
    const id = nextId++;
    const frame = { jsonrpc: "2.0", id, src: "plugpool", method: request.method, params: request.params };
    const url = new URL(`${target.url}/rpc`);
    describeOrigin(url, { maxBytes: MAX_ANSWER_BYTES });
    let freshNonce = false;
    for (let round = 1; round <= MAX_AUTH_ROUNDS; round++) {
      await request.beforeSend?.((inner) => exchange(target, inner, signal));
      // Looked up after beforeSend: a call it made may have renewed the session.
      const session = target.password === undefined ? undefined : sessions.get(target.device);
      const credentials = { username: SHELLY_USERNAME, password: target.password?.reveal() ?? "" };
      const answer = await post(url, frame, session?.authorization(credentials, "POST", url.pathname), signal);
      if (answer.status !== 401) return resultOf(answer, id, request.method);
      asked.add(target.device);
      if (target.password === undefined) {
        throw new PlugFailure("plug-unauthorized", "the device asks for a password and none is configured", { refused: true });
      }
      const challenge = parseDigestChallenge(answer.challenge);
      if (challenge?.algorithm !== "SHA-256") {
        throw new PlugFailure("plug-unauthorized", "the device asks for credentials in a way plugpool does not answer (not Digest with SHA-256)", { refused: true });
      }
      // A nonce just handed out and refused means the password is wrong; an older one may just have expired.
      if (session !== undefined && freshNonce) break;
      sessions.set(target.device, createDigestSession(challenge));
      freshNonce = true;
    }
    sessions.delete(target.device);
    throw new PlugFailure("plug-unauthorized", "the device rejected the password", { refused: true });
  }

  return {
    call: (target, request, signal) => queue.run(target.device, signal, () => exchange(target, request, signal)),
    authAsked: (device) => asked.has(device),
  };
}
