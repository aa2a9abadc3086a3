// Reads a device's answer within a bound on size and on time. ESPHome answers are about 100 bytes; anything
// much larger is not a web_server answer (a captive portal, a proxy, a device in trouble) and is not worth the
// memory, and a body that trickles in must not hold the device's queue past the call's deadline.
import { answerTooLarge } from "../http-device/device-request.ts";

/** The largest body read; more is refused unread. */
export const MAX_ANSWER_BYTES = 4096;

export interface AnswerBody {
  readonly text: string;
  readonly bytes: number;
}

/**
 * The whole body, once it has arrived within `MAX_ANSWER_BYTES` and before `signal` aborts; with `until`, the body
 * as far as where that holds of it, the rest left unread. A larger body (declared or counted) throws
 * `plug-bad-answer`; an abort throws the signal's reason. Either way, and after `until` held, the stream is
 * cancelled, which closes the connection under it.
 */
export async function readAnswerBody(response: Response, signal: AbortSignal, what: string, until?: (body: string) => boolean): Promise<AnswerBody> {
  const tooLarge = (): Error => answerTooLarge(what, response.status, MAX_ANSWER_BYTES);
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
      if (until !== undefined) {
        const text = new TextDecoder().decode(Buffer.concat(chunks));
        if (until(text)) {
          cancel();
          return { text, bytes };
        }
      }
    }
    return { text: new TextDecoder().decode(Buffer.concat(chunks)), bytes };
  } catch (error) {
    cancel();
    throw error;
  } finally {
    signal.removeEventListener("abort", cancel);
  }
}
