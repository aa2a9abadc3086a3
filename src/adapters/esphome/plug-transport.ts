// One HTTP request to an ESPHome device and its answer, read within its bounds (see answer-body.ts, and
// ../http-device/device-request.ts for node:http).
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
import { Agent as HttpAgent } from "node:http";
import { Agent as HttpsAgent } from "node:https";
import { mediaType } from "../http-device/answer.ts";
import { answerTooLarge, requestOnce, type DeviceAnswer } from "../http-device/device-request.ts";
import { MAX_ANSWER_BYTES, readAnswerBody } from "./answer-body.ts";

export interface TransportRequest {
  readonly url: URL;
  readonly method: "GET" | "POST";
  readonly authorization: string | undefined;
  /** Aborts the request, and the reading of its answer, with the signal's reason. */
  readonly signal: AbortSignal;
  /** The path asked for, as the adapter wrote it ("/switch/Relay"), for messages. */
  readonly path: string;
  /** For an answer that never ends by itself (`/events`): read only until this holds of the body, then closed. */
  readonly until?: ((body: string) => boolean) | undefined;
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
 * Sends one request and reads its whole answer, or up to where `until` holds (at most MAX_ANSWER_BYTES). Rejects with the network error,
 * the signal's reason, or `plug-bad-answer` for a larger body; redirects are answers like any other.
 */
export type Transport = (request: TransportRequest) => Promise<TransportAnswer>;

/** Longer than cluster-autoscaler's default scan interval (10 s), so a device's socket outlives the gap between Refreshes. */
export const IDLE_SOCKET_MS = 60_000;

export function createHttpTransport(): Transport {
  const options = { keepAlive: true, maxSockets: 1, maxFreeSockets: 1, timeout: IDLE_SOCKET_MS, scheduling: "lifo" as const };
  const http = new HttpAgent(options);
  const https = new HttpsAgent(options);
  return (request) => {
    const { url, method, signal, path } = request;
    const headers: Record<string, string> = method === "POST" ? { "content-length": "0" } : {};
    if (request.authorization !== undefined) headers.authorization = request.authorization;
    const agent = url.protocol === "https:" ? https : http;
    const tooLarge = (status: number): Error => answerTooLarge(`${method} ${path}`, status, MAX_ANSWER_BYTES);
    const { until } = request;
    return requestOnce({ url, method, headers, agent, signal, maxBytes: MAX_ANSWER_BYTES, tooLarge, ...(until && { until }) }).then(transportAnswer);
  };
}

function transportAnswer(answer: DeviceAnswer): TransportAnswer {
  return {
    status: answer.status,
    body: answer.text,
    contentType: mediaType(answer.headers["content-type"]),
    bytes: answer.bytes,
    challenge: answer.headers["www-authenticate"] ?? null,
  };
}

/** A fetch-based transport, for tests that hand the adapter a fetch of their own. */
export function createFetchTransport(fetchImpl: typeof fetch): Transport {
  return async (request) => {
    const { method, url, signal, path } = request;
    const response = await fetchImpl(url, {
      method,
      signal,
      redirect: "manual",
      headers: request.authorization === undefined ? {} : { authorization: request.authorization },
    });
    const { text, bytes } = await readAnswerBody(response, signal, `${method} ${path}`, request.until);
    return {
      status: response.status,
      body: text,
      contentType: mediaType(response.headers.get("content-type")),
      bytes,
      challenge: response.headers.get("www-authenticate"),
    };
  };
}
