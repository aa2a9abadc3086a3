// One request to Home Assistant's REST API (https://developers.home-assistant.io/docs/api/rest/) and its
// answer, read within a bound on size and on time. node:http with a keep-alive agent, as the ESPHome backend
// does and for the same reason: fetch's pool closes idle sockets after 4 s, so every Refresh of
// cluster-autoscaler (every 10 s) would open new connections (see src/adapters/esphome/plug-transport.ts).
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import { PlugFailure } from "../http-device/device-failure.ts";

export interface HubRequest {
  readonly method: "GET" | "POST";
  /** "/api/states/switch.gpu_box" */
  readonly path: string;
  readonly body?: unknown;
  /** Aborts the request, and the reading of its answer, with the signal's reason. */
  readonly signal: AbortSignal;
  /** The largest answer read; a larger one is refused unread (`plug-bad-answer`). */
  readonly maxBytes: number;
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
  return (base, token, request) => new Promise<HubAnswer>((resolve, reject) => {
    const url = new URL(request.path, base);
    const body = request.body === undefined ? undefined : JSON.stringify(request.body);
    const headers: Record<string, string> = { authorization: `Bearer ${token}`, accept: "application/json" };
    if (body !== undefined) {
      headers["content-type"] = "application/json";
      headers["content-length"] = String(Buffer.byteLength(body));
    }
    const secure = url.protocol === "https:";
    const send = secure ? httpsRequest : httpRequest;
    const req = send(url, { method: request.method, headers, agent: secure ? https : http, signal: request.signal });
    req.once("error", reject);
    req.once("response", (response: IncomingMessage) => {
      readBounded(response, request).then(resolve, (error: unknown) => {
        response.destroy();
        reject(error instanceof Error ? error : new Error("the answer could not be read"));
      });
    });
    req.end(body);
  });
}

function readBounded(response: IncomingMessage, request: HubRequest): Promise<HubAnswer> {
  const status = response.statusCode ?? 0;
  const contentType = mediaType(response.headers["content-type"]);
  const tooLarge = (): PlugFailure =>
    new PlugFailure("plug-bad-answer", `${request.method} ${request.path} answered HTTP ${status} with more than ${request.maxBytes} bytes`);
  return new Promise<HubAnswer>((resolve, reject) => {
    if (Number(response.headers["content-length"]) > request.maxBytes) {
      reject(tooLarge());
      return;
    }
    const chunks: Buffer[] = [];
    let bytes = 0;
    response.on("data", (chunk: Buffer) => {
      bytes += chunk.byteLength;
      if (bytes > request.maxBytes) reject(tooLarge());
      else chunks.push(chunk);
    });
    let ended = false;
    response.once("end", () => {
      ended = true;
      resolve({ status, contentType, bytes, body: Buffer.concat(chunks).toString("utf8") });
    });
    response.once("error", reject);
    // A connection closed before the whole body came (dropped, or destroyed on abort) ends the read too.
    response.once("close", () => {
      if (!ended) reject(request.signal.aborted ? (request.signal.reason as Error) : Object.assign(new Error("socket hang up"), { code: "ECONNRESET" }));
    });
  });
}

const MEDIA_TYPE = /^[a-z0-9][a-z0-9!#$&^_.+-]{0,63}\/[a-z0-9][a-z0-9!#$&^_.+-]{0,63}$/u;

/** The media type of a Content-Type value, only when it has the shape of one (it is whatever was sent); else "". */
function mediaType(header: string | undefined): string {
  const type = (header ?? "").split(";", 1)[0]?.trim().toLowerCase() ?? "";
  return MEDIA_TYPE.test(type) ? type : "";
}
