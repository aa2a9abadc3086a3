// What an ESPHome device says it is. Its web_server's `/events` stream (Server-Sent Events,
// https://html.spec.whatwg.org/multipage/server-sent-events.html#parsing-an-event-stream) opens with a `ping`
// event whose data is the device's config JSON: its friendly name as `title` and, on 2026 builds, its `uptime` in
// seconds (https://esphome.io/web-api/). The stream never ends by itself, so it is read up to that first ping and
// closed: ESP8266 devices serve a handful of sockets at most, and a stream left open would hold one.
import type { DeviceIdentity } from "../../domain/ports.ts";
import { parseObject, sizeOf } from "../http-device/answer.ts";
import { PlugFailure } from "../http-device/device-failure.ts";
import type { Credentials, PlugAnswer, PlugRequest, Send } from "./plug-http.ts";

/** The longest friendly name taken as an identity; ESPHome's are a few dozen characters. */
const MAX_TITLE_LENGTH = 256;

/** The first ping event of a stream read so far, once it has arrived whole; `data` undefined: it had none. */
export interface Ping {
  readonly data: string | undefined;
}

/**
 * The first `ping` event of `body`, the start of an event stream, once its closing blank line has arrived; else
 * undefined. Lines end with CRLF (ESP-IDF's server, which also opens with an empty line), LF (the async server of
 * ESP8266 and others) or CR, as the format allows.
 */
export function firstPing(body: string): Ping | undefined {
  let event = "";
  let data: string[] | undefined;
  const ending = /\r\n|\r|\n/gu;
  let start = body.startsWith("\uFEFF") ? 1 : 0;
  for (let end = ending.exec(body); end !== null; end = ending.exec(body)) {
    const line = body.slice(start, end.index);
    start = ending.lastIndex;
    if (line === "") {
      if (event === "ping") return { data: data?.join("\n") };
      event = "";
      data = undefined;
      continue;
    }
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    const value = colon === -1 ? "" : line.slice(line[colon + 1] === " " ? colon + 2 : colon + 1);
    if (field === "event") event = value;
    else if (field === "data") (data ??= []).push(value);
  }
  return undefined;
}

/** `GET /events`, read up to its first ping event: the connection is closed there. */
export const EVENTS_REQUEST: PlugRequest = { method: "GET", path: "/events", until: (body) => firstPing(body) !== undefined };

/**
 * The identity in an answer to EVENTS_REQUEST: `name "<title>"`, with the uptime where the device tells it.
 * Throws `plug-bad-answer` when the answer holds none, or a title that contains one of `secrets` (an answer
 * that echoes the request is not the device's name).
 */
export function identityOf(answer: PlugAnswer, secrets: readonly string[]): DeviceIdentity {
  const what = `GET ${EVENTS_REQUEST.path}`;
  if (answer.status !== 200) {
    throw new PlugFailure(answer.status >= 500 ? "plug-unreachable" : "plug-bad-answer", `${what} answered HTTP ${answer.status} ${sizeOf(answer)}`);
  }
  const ping = firstPing(answer.body);
  if (ping === undefined) throw new PlugFailure("plug-bad-answer", `${what} ended before its first ping event ${sizeOf(answer)}`);
  if (ping.data === undefined) {
    throw new PlugFailure("plug-bad-answer", `${what} opened with a ping without data: the device does not tell its name, so no switch command is sent to it`);
  }
  const config = parseObject(ping.data);
  const title = config?.title;
  if (typeof title !== "string" || title === "" || title.length > MAX_TITLE_LENGTH || secrets.some((s) => s !== "" && title.includes(s))) {
    throw new PlugFailure("plug-bad-answer", `${what} opened with a ping without a title plugpool can use ${sizeOf(answer)}`);
  }
  const uptime = config?.uptime;
  const known = typeof uptime === "number" && Number.isFinite(uptime) && uptime >= 0;
  return { id: `name ${JSON.stringify(title)}`, ...(known && { uptimeSeconds: uptime }) };
}

/** What the device says it is: its `/events` stream up to the first ping, with the slot `send` holds. */
export async function identify(send: Send, credentials: Credentials | undefined): Promise<DeviceIdentity> {
  return identityOf(await send(EVENTS_REQUEST), credentials === undefined ? [] : [credentials.password]);
}
