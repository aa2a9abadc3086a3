// One HTTP request to a device and its whole answer, read within a bound on size and stopped by the call's
// signal: a device that answers too much is not worth the memory, and a body that trickles in must not hold the
// device's queue past the call's deadline. Each backend brings its own agent (keep-alive or not, the CA to
// trust), headers and bound.
import { request as httpRequest, type Agent, type IncomingHttpHeaders, type IncomingMessage, type RequestOptions } from "node:http";
import { request as httpsRequest } from "node:https";
import { isDroppedConnection, PlugFailure } from "./device-failure.ts";

export interface DeviceRequest {
  readonly url: URL;
  readonly method: "GET" | "POST";
  readonly headers: Readonly<Record<string, string>>;
  /** Sent as the body, as JSON with its Content-Type and Content-Length; absent: no body. */
  readonly json?: unknown;
  /** The agent for the URL's scheme (an https.Agent for https://), or false for a connection of the request's own. */
  readonly agent: Agent | false;
  /** Aborts the request, and the reading of its answer, with the signal's reason. */
  readonly signal: AbortSignal;
  /** The largest body read; a larger one, declared or counted, is refused unread with `tooLarge(status)`. */
  readonly maxBytes: number;
  readonly tooLarge: (status: number) => Error;
  /**
   * For an answer that never ends by itself (a stream of events): asked with the body read so far at each piece of
   * it; once it holds, the answer ends there and its connection is closed.
   */
  readonly until?: (body: string) => boolean;
}

export interface DeviceAnswer {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly text: string;
  readonly bytes: number;
}

// One promise and plain listeners for the whole exchange: a Refresh sends one request to every device at once,
// and every promise and `once` wrapper per request is garbage that the young generation must sweep while
// hundreds of requests are still in flight.
/**
 * Sends one request and reads its whole answer (with `until`, up to where that holds). Rejects with the network
 * error, the signal's reason or `tooLarge`; redirects are answers like any other (never followed).
 */
export function requestOnce(request: DeviceRequest): Promise<DeviceAnswer> {
  return new Promise<DeviceAnswer>((resolve, reject) => {
    const { signal, maxBytes } = request;
    signal.throwIfAborted();
    const body = request.json === undefined ? undefined : JSON.stringify(request.json);
    const headers = body === undefined
      ? request.headers
      : { ...request.headers, "content-type": "application/json", "content-length": String(Buffer.byteLength(body)) };
    const address = addressOf(request.url);
    const send = address.protocol === "https:" ? httpsRequest : httpRequest;
    const req = send({ ...address, method: request.method, headers, agent: request.agent });
    let settled = false;
    const settle = (error: Error | undefined, answer?: DeviceAnswer): void => {
      if (settled) return;
      settled = true;
      signal.removeEventListener("abort", onAbort);
      if (error === undefined) resolve(answer as DeviceAnswer);
      else reject(error);
    };
    // The abort's reason travels as the request's error: Node builds no error of its own for it.
    const onAbort = (): void => { req.destroy(signal.reason as Error); };
    signal.addEventListener("abort", onAbort);
    // `on`, not `once`: a socket may fail again after the first error, and an unheard error would crash.
    req.on("error", settle);
    req.on("response", (res: IncomingMessage) => {
      const status = res.statusCode ?? 0;
      // An answer not read to its end leaves the socket unusable for the next request.
      const fail = (error: Error): void => {
        if (settled) return;
        req.destroy();
        settle(signal.aborted ? (signal.reason as Error) : error);
      };
      if (Number(res.headers["content-length"]) > maxBytes) {
        fail(request.tooLarge(status));
        return;
      }
      // Device answers come in one chunk: an array only for the rare one that does not.
      let first: Buffer | undefined;
      let more: Buffer[] | undefined;
      let bytes = 0;
      const body = (): string => (more !== undefined ? Buffer.concat(more).toString("utf8") : first === undefined ? "" : first.toString("utf8"));
      res.on("data", (chunk: Buffer) => {
        bytes += chunk.byteLength;
        if (bytes > maxBytes) fail(request.tooLarge(status));
        else if (first === undefined) first = chunk;
        else (more ??= [first]).push(chunk);
        if (request.until === undefined || settled) return;
        const text = body();
        if (!request.until(text)) return;
        settle(undefined, { status, headers: res.headers, text, bytes });
        req.destroy();
      });
      res.on("end", () => {
        settle(undefined, { status, headers: res.headers, text: body(), bytes });
      });
      // Aborted mid-body: the request's destroy reaches the response as its error.
      res.on("error", fail);
      // A connection closed before the whole body came, without an error, ends the read too.
      res.on("close", () => {
        if (!settled) fail(Object.assign(new Error("socket hang up"), { code: "ECONNRESET" }));
      });
    });
    req.end(body);
  });
}

// What node:http needs of a URL, taken apart once per URL: handing it the URL itself has it take the URL apart
// (and copy the parts) at every request, and a Refresh sends one to every device.
const addresses = new WeakMap<URL, RequestOptions>();

function addressOf(url: URL): RequestOptions {
  let address = addresses.get(url);
  if (address === undefined) {
    // An IPv6 host is written in brackets in a URL and without them in a socket address.
    const hostname = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname;
    address = { protocol: url.protocol, hostname, ...(url.port !== "" && { port: Number(url.port) }), path: url.pathname + url.search };
    addresses.set(url, address);
  }
  return address;
}

/**
 * `send()`, and once more when a GET's connection was dropped under it (a kept-alive socket the device closed
 * meanwhile): see `mayResend`.
 */
export async function resendDroppedGet<T>(method: "GET" | "POST", signal: AbortSignal, send: () => Promise<T>): Promise<T> {
  try {
    return await send();
  } catch (error) {
    if (!mayResend(method, signal, error)) throw error;
    return send();
  }
}

/**
 * Whether a request that failed with `error` is sent once more: a GET whose connection was dropped under it (a
 * kept-alive socket the device closed meanwhile). A read may be repeated, a command never, and nothing is re-sent
 * once `signal` aborted.
 */
export function mayResend(method: "GET" | "POST", signal: AbortSignal, error: unknown): boolean {
  return method === "GET" && !signal.aborted && isDroppedConnection(error);
}

/** "GET /switch/Relay answered HTTP 200 with more than 4096 bytes": an answer refused for its size. */
export function answerTooLarge(what: string, status: number, maxBytes: number): PlugFailure {
  return new PlugFailure("plug-bad-answer", `${what} answered HTTP ${status} with more than ${maxBytes} bytes`);
}
