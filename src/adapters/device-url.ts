// Base URLs of devices on the network (plugs, hubs, BMCs), checked and normalised once, at configuration load:
// one spelling per physical device, so that requests to it share one queue and two spellings of one device are
// seen as one.
/**
 * A device's base URL, normalised, with the device it reaches, or why it was refused. The refusal never repeats
 * the URL (it may hold credentials).
 */
export type DeviceUrl = { readonly ok: true; readonly url: string; readonly device: string } | { readonly ok: false; readonly expected: string };

/**
 * Checks a device's base URL and normalises it as the clients and the same-device rules need it: lower-case
 * scheme and host, no default port, no trailing slash (the URL origin). `example` completes a refusal ("e.g.
 * http://plug-1.local"); `credentialsHint` says where credentials go instead of the URL.
 */
export function normaliseDeviceUrl(text: string, example: string, credentialsHint: string): DeviceUrl {
  // The URL parser forgives a lot (spaces, "http:host", backslashes); a config should say what it means.
  const url = /^https?:\/\/[^/\\]/i.test(text) && !/[\s\\]/.test(text) ? URL.parse(text) : null;
  if (url === null) {
    return { ok: false, expected: `must be an http:// or https:// URL without credentials (${example})` };
  }
  if (text.includes("@")) {
    return {
      ok: false,
      expected: `must be an http:// or https:// URL without credentials: ${credentialsHint}`,
    };
  }
  if (url.pathname !== "/" || text.includes("?") || text.includes("#")) {
    return { ok: false, expected: `must be the device's base URL, without a path, query or fragment (${example})` };
  }
  return { ok: true, url: url.origin, device: deviceOf(url) };
}

// The URL parser has already lower-cased the host, written IPv4 in dotted decimal and dropped a default port;
// it writes [::ffff:10.0.0.5] as [::ffff:a00:5].
const MAPPED_IPV4 = /^\[::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})\]$/u;

/**
 * One name per physical device, so that two spellings of it share one request queue and count as one plug:
 * the scheme is left out (http://h and https://h:443 are the same machine), as are a trailing dot and the
 * IPv6 form of an IPv4 address.
 */
function deviceOf(url: URL): string {
  const mapped = MAPPED_IPV4.exec(url.hostname);
  const host = mapped ? ipv4Of(mapped[1] ?? "", mapped[2] ?? "") : url.hostname.replace(/\.$/u, "");
  return url.port === "" ? host : `${host}:${url.port}`;
}

function ipv4Of(high: string, low: string): string {
  const [h, l] = [Number.parseInt(high, 16), Number.parseInt(low, 16)];
  return [h >> 8, h & 255, l >> 8, l & 255].join(".");
}
