// A Shelly device's base URL as a config gives it, and the one name of the device behind it.

export type ShellyUrl = { readonly ok: true; readonly url: string; readonly device: string } | { readonly ok: false; readonly expected: string };

const EXAMPLE = "e.g. http://192.168.1.52";

// The URL parser writes [::ffff:10.0.0.5] as [::ffff:a00:5].
const MAPPED_IPV4 = /^\[::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})\]$/u;

/**
 * The device's base URL (origin) and its name: host and port, lower case, without a trailing dot, an
 * IPv4-mapped IPv6 address as IPv4, the port only when not the scheme's default, the scheme left out (so two
 * spellings of one device share one queue and count as one device).
 */
export function normaliseShellyUrl(text: string): ShellyUrl {
  // The URL parser forgives a lot (spaces, "http:host", backslashes); a config should say what it means.
  const url = /^https?:\/\/[^/\\]/iu.test(text) && !/[\s\\]/u.test(text) ? URL.parse(text) : null;
  if (url === null) return { ok: false, expected: `must be an http:// or https:// URL (${EXAMPLE})` };
  if (text.includes("@")) return { ok: false, expected: "must be a URL without credentials: the password comes from passwordFile or PLUGPOOL_SHELLY_PASSWORD" };
  if (url.pathname !== "/" || text.includes("?") || text.includes("#")) {
    return { ok: false, expected: `must be the device's base URL, without a path, query or fragment (${EXAMPLE})` };
  }
  const mapped = MAPPED_IPV4.exec(url.hostname);
  const host = mapped ? ipv4Of(mapped[1] ?? "", mapped[2] ?? "") : url.hostname.replace(/\.$/u, "");
  return { ok: true, url: url.origin, device: url.port === "" ? host : `${host}:${url.port}` };
}

function ipv4Of(high: string, low: string): string {
  const [h, l] = [Number.parseInt(high, 16), Number.parseInt(low, 16)];
  return [h >> 8, h & 255, l >> 8, l & 255].join(".");
}
