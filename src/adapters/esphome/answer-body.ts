// Reads a device's answer within a bound on size and on time. ESPHome answers are about 100 bytes; anything
// much larger is not a web_server answer (a captive portal, a proxy, a device in trouble) and is not worth the
// memory, and a body that trickles in must not hold the device's queue past the call's deadline.
import { PlugFailure } from "../http-device/device-failure.ts";

/** The largest body read; more is refused unread. */
export const MAX_ANSWER_BYTES = 4096;

export interface AnswerBody {
  readonly text: string;
  readonly bytes: number;
}

/**
 * The whole body, once it has arrived within `MAX_ANSWER_BYTES` and before `signal` aborts. A larger body
 * (declared or counted) throws `plug-bad-answer`; an abort throws the signal's reason. Either way the stream is
 * cancelled, which closes the connection under it.
 */
export async function readAnswerBody(response: Response, signal: AbortSignal, what: string): Promise<AnswerBody> {
  const tooLarge = (): PlugFailure =>
    new PlugFailure("plug-bad-answer", `${what} answered HTTP ${response.status} with more than ${MAX_ANSWER_BYTES} bytes`);
  const body = response.body;
  if (body === null) return { text: "", bytes: 0 };
  const reader: ReadableStreamDefaultReader<Uint8Array> = body.getReader();
  const cancel = (): void => {
    reader.cancel().catch(() => undefined);
  };
  signal.addEventListener("abort", cancel, { once: true });
  try {
    if (Number(response.headers.get("content-length")) > MAX_ANSWER_BYTES) throw tooLarge();
    const chunks: Uint8Array[] = [];
    let bytes = 0;
    for (;;) {
      signal.throwIfAborted();
      const { done, value } = await reader.read();
      // A cancel on abort ends a pending read as if the body were complete: it is not.
      signal.throwIfAborted();
      if (done) break;
      bytes += value.byteLength;
      if (bytes > MAX_ANSWER_BYTES) throw tooLarge();
      chunks.push(value);
    }
    return { text: new TextDecoder().decode(Buffer.concat(chunks)), bytes };
  } catch (error) {
    cancel();
    throw error;
  } finally {
    signal.removeEventListener("abort", cancel);
  }
}

const MEDIA_TYPE = /^[a-z0-9][a-z0-9!#$&^_.+-]{0,63}\/[a-z0-9][a-z0-9!#$&^_.+-]{0,63}$/u;

/**
 * The media type of a `Content-Type` value, for messages: only when it has the shape of one (`text/html`),
 * since the value is whatever the device sent; "" otherwise.
 */
export function mediaType(header: string | null): string {
  const type = (header ?? "").split(";", 1)[0]?.trim().toLowerCase() ?? "";
  return MEDIA_TYPE.test(type) ? type : "";
}
