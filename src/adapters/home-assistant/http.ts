// One request to Home Assistant's REST API (https://developers.home-assistant.io/docs/api/rest/) and its
// answer, read within a bound on size and on time. node:http with a keep-alive agent, as the ESPHome backend
// does and for the same reason: fetch's pool closes idle sockets after 4 s, so every Refresh of
// cluster-autoscaler (every 10 s) would open new connections (see src/adapters/esphome/plug-transport.ts).
import { Agent as HttpAgent } from "node:http";
import { Agent as HttpsAgent } from "node:https";
import { mediaType } from "../http-device/answer.ts";
import { answerTooLarge, requestOnce } from "../http-device/device-request.ts";

export interface HubRequest {
  readonly method: "GET" | "POST";
  /** "/api/states/switch.gpu_box" */
  readonly path: string;
  readonly body?: unknown;
  /** Aborts the request, and the reading of its answer, with the signal's reason. */
  readonly signal: AbortSignal;
  /** The largest answer read; a larger one is refused unread (`plug-bad-answer`). */
  readonly maxBytes: number;
  /** A request of a switch command (its read first, the service call, the read-backs), not of a read. */
  readonly command: boolean;
}

export interface HubAnswer {
  readonly status: number;
  readonly body: string;
  /** The declared media type when it looks like one, else "". */
  readonly contentType: string;
  readonly bytes: number;
}

export type HubTransport = (base: string, token: string, request: HubRequest) => Promise<HubAnswer>;

// A few sockets per instance: calls are serialised per entity, and one instance serves every machine's.
const agentOptions = { keepAlive: true, keepAliveMsecs: 30_000, maxSockets: 4, maxFreeSockets: 4, timeout: 60_000 };

export function createHubTransport(): HubTransport {
  const http = new HttpAgent(agentOptions);
  const https = new HttpsAgent(agentOptions);
  return async (base, token, request) => {
    const { method, path, maxBytes } = request;
    const url = new URL(path, base);
    const answer = await requestOnce({
      url,
      method,
      headers: { authorization: `Bearer ${token}`, accept: "application/json" },
      json: request.body,
      // A command's requests take connections of their own: with the pool's sockets all busy with reads (a
      // Refresh reads every entity at once), a switch-off would wait for one after the safety check said yes.
      agent: request.command ? false : url.protocol === "https:" ? https : http,
      signal: request.signal,
      maxBytes,
      tooLarge: (status) => answerTooLarge(`${method} ${path}`, status, maxBytes),
    });
    return { status: answer.status, contentType: mediaType(answer.headers["content-type"]), bytes: answer.bytes, body: answer.text };
  };
}
