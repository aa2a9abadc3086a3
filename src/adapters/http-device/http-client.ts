// plugpool's HTTP client: ky (https://github.com/sindresorhus/ky) over one undici Agent for the whole process
// (and one more for each private CA a BMC is trusted by, and for requests that must not queue: see `agentFor`).
//
// Why undici's own Agent: cluster-autoscaler calls Refresh every 10 s (its --scan-interval), and the pool behind
// Node's built-in fetch closes idle sockets after 4 s, so every Refresh would connect to every device anew. The
// Agent keeps a device's one socket for 60 s, caps every answer (`maxResponseSize`), and is shared by every
// backend and by the CLI.
//
// Why a fetch of our own under ky: Node 24's global fetch refuses an undici 8 Agent as its dispatcher ("invalid
// onRequestStart method"), and undici's fetch refuses the Request that ky builds (a Request of Node's bundled
// undici, not of this one); the request is handed on as its URL and fields instead.
//
// Answers are asked for uncompressed (`accept-encoding: identity`), and read counting their bytes as decoded too:
// undici's fetch inflates whatever a server sends compressed, asked or not, and the Agent's cap counts the bytes
// on the wire, so a few KB of gzip could otherwise become any size in memory.
//
// ky's defaults are not plugpool's: no retries (`retry: 0`; the one resend a read may get is `resendDroppedGet`'s,
// and a switch command is never sent twice), no per-attempt timeout (`timeout: false`; each call's signal is its
// one deadline, and it covers the reading of the body), every status an answer (`throwHttpErrors: false`), and
// redirects never followed.
import ky, { type KyInstance } from "ky";
import { Agent, Client, Pool, fetch as undiciFetch, type Dispatcher } from "undici";
import { errorCode, isDroppedConnection, PlugFailure } from "./device-failure.ts";

/** How plugpool talks to one origin (scheme, host and port); set before its first request. */
export interface OriginRules {
  /** The largest answer taken; a larger one, declared or counted, is refused unread. */
  readonly maxBytes: number;
  /** Connections kept open to it; devices serve one request at a time, so 1 unless said otherwise. */
  readonly connections?: number;
}

/** An origin no caller described gets the smallest cap any caller sets: every caller in plugpool describes its own. */
const DEFAULT_RULES: OriginRules = { maxBytes: 4096 };

/** Longer than cluster-autoscaler's default scan interval (10 s), so a device's socket outlives the gap between Refreshes. */
const IDLE_SOCKET_MS = 60_000;

const origins = new Map<string, OriginRules>();

/**
 * Sets how `url`'s origin is talked to. The first rules set for an origin hold: the Agent made its connections
 * with them.
 */
export function describeOrigin(url: string | URL, rules: OriginRules): void {
  const { origin } = new URL(url);
  if (!origins.has(origin)) origins.set(origin, rules);
}

/** The largest answer taken from `url`'s origin. */
function maxBytesOf(url: string | URL): number {
  return (origins.get(new URL(url).origin) ?? DEFAULT_RULES).maxBytes;
}

/**
 * The Agents, by what sets their connections apart. An Agent keeps its connections by origin alone, so a BMC
 * whose section names its own CA gets an Agent for that CA (a connection made trusting one CA is never handed to
 * a request that trusts another), and requests that must not queue behind the pool's get one of their own. Every
 * other call of the process shares the one Agent of the system's trust roots.
 */
const agents = new Map<string, Agent>();

function agentFor(ca: string | undefined, apart: boolean): Agent {
  const key = `${apart ? "apart" : "pool"}\n${ca ?? ""}`;
  let agent = agents.get(key);
  if (agent === undefined) {
    agent = new Agent({
      keepAliveTimeout: IDLE_SOCKET_MS,
      connections: 1,
      ...(ca !== undefined && { connect: { ca } }),
      factory(origin: string | URL, options: Agent.Options): Dispatcher {
        const rules = origins.get(new URL(origin).origin) ?? DEFAULT_RULES;
        const own = { ...options, maxResponseSize: rules.maxBytes };
        const connections = rules.connections ?? 1;
        return connections === 1 ? new Client(origin, own) : new Pool(origin, { ...own, connections });
      },
    });
    agents.set(key, agent);
  }
  return agent;
}

/** A fetch over `agent` that takes the Request ky builds. */
function fetchOver(agent: Agent): typeof globalThis.fetch {
  return async (input, init) => {
    const request = input instanceof Request ? input : new Request(input, init);
    const body = request.body === null ? null : await request.arrayBuffer();
    return undiciFetch(request.url, {
      method: request.method,
      headers: [...request.headers],
      body,
      signal: request.signal,
      redirect: request.redirect,
      dispatcher: agent,
    });
  };
}

export interface HttpClientOptions {
  /** For tests that play the far end: requests go to it instead of the network. */
  readonly fetch?: typeof globalThis.fetch | undefined;
  /** PEM of the CA the servers' certificates must chain to; absent: the system's trust roots. */
  readonly ca?: string | undefined;
  /**
   * The requests never wait for a connection another client's requests hold (for a switch command while reads
   * fill an origin's pool); they should say `connection: close`, as such connections are not worth keeping.
   */
  readonly apart?: boolean;
}

/** A ky instance with plugpool's rules, over the Agent of its trust roots. */
export function createHttpClient(options: HttpClientOptions = {}): KyInstance {
  const fetch = options.fetch ?? fetchOver(agentFor(options.ca, options.apart === true));
  return ky.create({ fetch, retry: 0, timeout: false, throwHttpErrors: false, redirect: "manual", headers: { "accept-encoding": "identity" } });
}

export interface HttpRequest {
  readonly url: URL;
  readonly method: "GET" | "POST";
  readonly headers?: Readonly<Record<string, string>>;
  /** Sent as the body, as JSON with its Content-Type; absent: no body. */
  readonly json?: unknown;
  /** The call's one deadline and abort: it ends the request and the reading of its answer, with its reason. */
  readonly signal: AbortSignal;
  /** The request for messages, as the adapter wrote it: "GET /switch/Relay". */
  readonly what: string;
  /**
   * For an answer that never ends by itself (a stream of events): asked with the body read so far at each piece of
   * it; once it holds, the answer ends there and its connection is closed.
   */
  readonly until?: ((body: string) => boolean) | undefined;
}

export interface HttpAnswer {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
  readonly bytes: number;
}

/**
 * Sends one request and reads its whole answer (with `until`, up to where that holds). Rejects with the network
 * error, the signal's reason, or `plug-bad-answer` for an answer over its origin's `maxBytes`; redirects are
 * answers like any other.
 */
export async function sendRequest(client: KyInstance, request: HttpRequest): Promise<HttpAnswer> {
  const { url, what, until } = request;
  const maxBytes = maxBytesOf(url);
  let status: number | undefined;
  try {
    const response = await client(url, {
      method: request.method,
      signal: request.signal,
      ...(request.headers !== undefined && { headers: request.headers }),
      ...(request.json !== undefined && { json: request.json }),
    });
    status = response.status;
    const answer = await readAnswer(response, maxBytes, until);
    if (answer !== undefined) return answer;
  } catch (error) {
    if (errorCode(error) !== "UND_ERR_RES_EXCEEDED_MAX_SIZE") throw error;
  }
  throw new AnswerTooLarge(what, status, maxBytes);
}

/** An answer refused for its size: "GET /switch/Relay answered HTTP 200 with more than 4096 bytes". */
export class AnswerTooLarge extends PlugFailure {
  readonly status: number | undefined;
  readonly maxBytes: number;

  constructor(what: string, status: number | undefined, maxBytes: number) {
    super("plug-bad-answer", `${what} ${status === undefined ? "answered" : `answered HTTP ${status}`} with more than ${maxBytes} bytes`);
    this.status = status;
    this.maxBytes = maxBytes;
  }
}

/**
 * The answer, or undefined when its body, as decoded, is larger than `maxBytes` (read no further); with `until`,
 * read only as far as where that holds. The stream is cancelled either way, which closes a connection left unread.
 */
export async function readAnswer(response: Response, maxBytes: number, until?: (body: string) => boolean): Promise<HttpAnswer | undefined> {
  const { status, headers } = response;
  if (response.body === null) return { status, headers, text: "", bytes: 0 };
  const reader: ReadableStreamDefaultReader<Uint8Array> = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let bytes = 0;
  const text = (): string => (chunks.length === 1 ? Buffer.from(chunks[0] as Uint8Array).toString("utf8") : Buffer.concat(chunks).toString("utf8"));
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return { status, headers, text: text(), bytes };
      bytes += value.byteLength;
      if (bytes > maxBytes) return undefined;
      chunks.push(value);
      if (until?.(text()) === true) return { status, headers, text: text(), bytes };
    }
  } finally {
    // Cancelling closes the connection under a stream that would not end by itself, or was refused unread.
    reader.cancel().catch(() => undefined);
  }
}

/**
 * `send()`, and once more when a GET's connection was dropped under it (a kept-alive socket the device closed
 * meanwhile). A read may be repeated, a command never, and nothing is re-sent once `signal` aborted.
 */
export async function resendDroppedGet<T>(method: "GET" | "POST", signal: AbortSignal, send: () => Promise<T>): Promise<T> {
  try {
    return await send();
  } catch (error) {
    if (method !== "GET" || signal.aborted || !isDroppedConnection(error)) throw error;
    return send();
  }
}
