// Requests to Home Assistant's REST API (https://developers.home-assistant.io/docs/api/rest/): each one carries
// the entity's long-lived access token as a bearer token, and each answer is read within a bound on size.
import { mediaType, sizeOf } from "../http-device/answer.ts";
import type { DeviceCall } from "../http-device/device-call.ts";
import { PlugFailure } from "../http-device/device-failure.ts";
import { createHttpClient, describeOrigin, resendDroppedGet, sendRequest } from "../http-device/http-client.ts";
import type { HomeAssistantEntity } from "./entity.ts";

/**
 * A state answer is about 400 bytes, a service call's list of changed states a few of those; GET /api/config,
 * read by `probe` only, lists every loaded integration, and is the largest answer taken.
 */
export const MAX_ANSWER_BYTES = 256 * 1024;

// A few connections per instance: calls are serialised per entity, and one instance serves every machine's.
const CONNECTIONS = 4;

// Statuses with which Home Assistant says it did not carry a call out: a bad request or unknown service (400),
// the token (401), permissions (403), a wrong path (404, 405). After any other answer, or none, a service call
// sent may have been carried out: the API shields a running call from the connection's loss
// (https://github.com/home-assistant/core/blob/2025.4.4/homeassistant/components/api/__init__.py).
export const REFUSALS: ReadonlySet<number> = new Set([400, 401, 403, 404, 405]);

/** A call to one entity; its target is the entity's queue key. */
export type Call = DeviceCall<string>;

/** What plugpool takes of an answer: its status, and its body for the adapter alone. */
export interface HubAnswer {
  readonly status: number;
  readonly body: string;
  /** The declared media type when it looks like one, else "". */
  readonly contentType: string;
  readonly bytes: number;
}

export interface HubApi {
  /** Makes `call` one that switches: its requests from now on, reads included, go as a command's. */
  command(call: Call): void;
  /** Sends one request within `call` and reads its whole answer (at most MAX_ANSWER_BYTES). */
  send(address: HomeAssistantEntity, call: Call, method: "GET" | "POST", path: string, json?: unknown): Promise<HubAnswer>;
}

export function createHubApi(): HubApi {
  const reads = createHttpClient();
  // A command's requests (its read first, the service call, the read-backs) take connections of their own: with
  // the pool's connections all busy with reads (a Refresh reads every entity at once), a switch-off would wait for
  // one after the safety check said yes.
  const commandClient = createHttpClient({ apart: true });
  /** The calls that switch. */
  const commands = new WeakSet<Call>();

  return {
    command: (call) => {
      commands.add(call);
    },
    async send(address, call, method, path, json) {
      const url = new URL(path, address.url);
      describeOrigin(url, { maxBytes: MAX_ANSWER_BYTES, connections: CONNECTIONS });
      const command = commands.has(call);
      const headers = { authorization: `Bearer ${address.token.reveal()}`, accept: "application/json", ...(command && { connection: "close" }) };
      const request = { url, method, headers, json, signal: call.signal, what: `${method} ${path}` };
      const answer = await resendDroppedGet(method, call.signal, () => sendRequest(command ? commandClient : reads, request));
      return { status: answer.status, body: answer.text, contentType: mediaType(answer.headers.get("content-type")), bytes: answer.bytes };
    },
  };
}

/** A status that is not 200, as a failure: what it means, never what the answer said. */
export function statusFailure(answer: HubAnswer, method: string, path: string): PlugFailure {
  const refused = REFUSALS.has(answer.status);
  const what = `${method} ${path} answered HTTP ${answer.status}`;
  if (answer.status === 401 || answer.status === 403) {
    return new PlugFailure("plug-unauthorized", `${what}: the token was refused (check it and its user's rights)`, { refused });
  }
  if (answer.status === 404 && path.startsWith("/api/states/")) {
    return new PlugFailure("plug-entity-not-found", `${what}: Home Assistant has no such entity`, { refused });
  }
  // 5xx: Home Assistant or a proxy in front of it is in trouble, worth retrying later.
  return new PlugFailure(answer.status >= 500 ? "plug-unreachable" : "plug-bad-answer", `${what} ${sizeOf(answer)}`, { refused });
}
