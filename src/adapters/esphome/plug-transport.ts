// One HTTP request to a device and its answer, read within its bounds (see answer-body.ts).
//
// Why node:http rather than fetch: cluster-autoscaler calls Refresh every 10 s (its --scan-interval), and
// fetch's built-in pool (undici) closes idle sockets after 4 s (its keepAliveTimeout) with no way to change
// that short of the undici package's own Agent, which Node does not export. So every Refresh opened a new
// connection to every plug, and fetch's Request/Response/stream machinery cost 4–5× the CPU of a plain
// node:http client. An http.Agent keeps one idle socket per device (maxSockets: 1, since requests to a
// device are serialised by the device queue anyway, and ESPHome devices accept only a handful of sockets:
// https://github.com/esphome/esphome/pull/14067) for longer than the scan interval; ESP-IDF keeps idle
// sockets open and may purge one when it runs short (https://github.com/esphome/esphome/pull/12481), which
// the GET retry in plug-http.ts covers; ESP8266 devices close after each answer.
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import { mediaType, MAX_ANSWER_BYTES, readAnswerBody } from "./answer-body.ts";
import { PlugFailure } from "../http-device/device-failure.ts";

export interface TransportRequest {
  readonly url: URL;
  readonly method: "GET" | "POST";
  readonly authorization: string | undefined;
  /** Aborts the request, and the reading of its answer, with the signal's reason. */
  readonly signal: AbortSignal;
  /** "GET /switch/Relay", for messages. */
  readonly what: string;
}

export interface TransportAnswer {
  readonly status: number;
  readonly body: string;
  /** The declared media type when it looks like one, else "" (see `mediaType`). */
  readonly contentType: string;
  readonly bytes: number;
  readonly challenge: string | null;
}

/**
 * Sends one request and reads its whole answer (at most MAX_ANSWER_BYTES). Rejects with the network error,
 * the signal's reason, or `plug-bad-answer` for a larger body; redirects are answers like any other.
 */
export type Transport = (request: TransportRequest) => Promise<TransportAnswer>;

/** Longer than cluster-autoscaler's default scan interval (10 s), so a device's socket outlives the gap between Refreshes. */
export const IDLE_SOCKET_MS = 60_000;

export function createHttpTransport(): Transport {
  const options = { keepAlive: true, maxSockets: 1, maxFreeSockets: 1, timeout: IDLE_SOCKET_MS, scheduling: "lifo" as const };
  const http = new HttpAgent(options);
  const https = new HttpsAgent(options);
  return (request) =>
    new Promise<TransportAnswer>((resolve, reject) => {
      const { url, signal } = request;
      signal.throwIfAborted();
      const secure = url.protocol === "https:";
      const headers: Record<string, string> = request.method === "POST" ? { "content-length": "0" } : {};
      if (request.authorization !== undefined) headers.authorization = request.authorization;
      const send = secure ? httpsRequest : httpRequest;
      const req = send(url, { method: request.method, headers, agent: secure ? https : http });
      // The abort's reason travels as the request's error: Node builds no error of its own for it.
      const onAbort = (): void => { req.destroy(signal.reason as Error); };
      signal.addEventListener("abort", onAbort, { once: true });
      const settle = (): void => { signal.removeEventListener("abort", onAbort); };
      // `on`, not `once`: a socket may fail again after the first error, and an unheard error would crash.
      req.on("error", (error) => {
        settle();
        reject(error);
      });
      req.once("response", (res) => {
        readBody(res, request.what).then(
          ({ text, bytes }) => {
            settle();
            resolve({
              status: res.statusCode ?? 0,
              body: text,
              contentType: mediaType(res.headers["content-type"] ?? null),
              bytes,
              challenge: res.headers["www-authenticate"] ?? null,
            });
          },
          (error: unknown) => {
            settle();
            // An answer not read to its end leaves the socket unusable for the next request.
            req.destroy();
            reject(signal.aborted ? (signal.reason as Error) : (error as Error));
          },
        );
      });
      req.end();
    });
}

function readBody(res: IncomingMessage, what: string): Promise<{ text: string; bytes: number }> {
  const tooLarge = (): PlugFailure =>
    new PlugFailure("plug-bad-answer", `${what} answered HTTP ${res.statusCode ?? 0} with more than ${MAX_ANSWER_BYTES} bytes`);
  return new Promise((resolve, reject) => {
    if (Number(res.headers["content-length"]) > MAX_ANSWER_BYTES) {
      reject(tooLarge());
      return;
    }
    const chunks: Buffer[] = [];
    let bytes = 0;
    res.on("data", (chunk: Buffer) => {
      bytes += chunk.byteLength;
      if (bytes > MAX_ANSWER_BYTES) {
        res.removeAllListeners("data");
        res.removeAllListeners("end");
        reject(tooLarge());
        return;
      }
      chunks.push(chunk);
    });
    res.once("end", () => {
      resolve({ text: chunks.length === 1 ? (chunks[0] ?? Buffer.alloc(0)).toString("utf8") : Buffer.concat(chunks).toString("utf8"), bytes });
    });
    // Aborted mid-body: the request's destroy reaches the response as its error.
    res.on("error", reject);
  });
}

/** A fetch-based transport, for tests that hand the adapter a fetch of their own. */
export function createFetchTransport(fetchImpl: typeof fetch): Transport {
  return async (request) => {
    const { method, url, signal, what } = request;
    const response = await fetchImpl(url, {
      method,
      signal,
      redirect: "manual",
      headers: request.authorization === undefined ? {} : { authorization: request.authorization },
    });
    const { text, bytes } = await readAnswerBody(response, signal, what);
    return {
      status: response.status,
      body: text,
      contentType: mediaType(response.headers.get("content-type")),
      bytes,
      challenge: response.headers.get("www-authenticate"),
    };
  };
}
