// What plugpool reads of a device's answer and says about it: its JSON object, and for messages its media type
// and size, never its text (a device, a captive portal or a proxy can echo the request into it).

const MEDIA_TYPE = /^[a-z0-9][a-z0-9!#$&^_.+-]{0,63}\/[a-z0-9][a-z0-9!#$&^_.+-]{0,63}$/u;

/**
 * The media type of a `Content-Type` value, for messages: only when it has the shape of one (`text/html`),
 * since the value is whatever the device sent; "" otherwise.
 */
export function mediaType(header: string | null | undefined): string {
  const type = (header ?? "").split(";", 1)[0]?.trim().toLowerCase() ?? "";
  return MEDIA_TYPE.test(type) ? type : "";
}

/** "(text/html, 27 bytes)", or "(27 bytes)" without a media type: what an answer was, never what it said. */
export function sizeOf(answer: { readonly bytes: number; readonly contentType?: string }): string {
  const bytes = `${answer.bytes} ${answer.bytes === 1 ? "byte" : "bytes"}`;
  return answer.contentType === undefined || answer.contentType === "" ? `(${bytes})` : `(${answer.contentType}, ${bytes})`;
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The JSON object a body holds; undefined when it holds none (no JSON, or JSON of another kind). */
export function parseObject(body: string): Record<string, unknown> | undefined {
  try {
    const data: unknown = JSON.parse(body);
    return isObject(data) ? data : undefined;
  } catch {
    return undefined;
  }
}
