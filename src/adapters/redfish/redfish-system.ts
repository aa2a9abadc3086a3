// A Redfish ComputerSystem as the adapter knows it: the BMC that manages it, its Id there, and how to reach
// and log in to that BMC.
import type { SecretCredentials } from "../backend-section.ts";
import { normaliseDeviceUrl, type DeviceUrl } from "../device-url.ts";

export interface RedfishSystem {
  /** Base URL of the BMC, normalised (lower-case scheme and host, no trailing slash). */
  readonly url: string;
  /** The BMC, however its URL is spelled (see normaliseDeviceUrl): its requests are serialised. */
  readonly device: string;
  /** The system's Id: the last segment of /redfish/v1/Systems/<Id>. */
  readonly system: string;
  /** Basic: credentials on every request. Session: one login (POST /redfish/v1/SessionService/Sessions), then its token. */
  readonly auth: "basic" | "session";
  /** The CA the BMC's certificate must chain to, read at start; absent: the system's trust roots. */
  readonly ca?: { readonly file: string; readonly pem: string };
  readonly credentials: SecretCredentials;
}

/**
 * A BMC's base URL checked and normalised. https only, since every request carries the credentials or the
 * session token; plain http only to a loopback address (a local proxy or tunnel to the BMC, or a test BMC).
 */
export function parseBmcUrl(text: string): DeviceUrl {
  const parsed = normaliseDeviceUrl(text, "e.g. https://10.0.0.5", "use usernameFile and passwordFile, or PLUGPOOL_REDFISH_USERNAME and PLUGPOOL_REDFISH_PASSWORD");
  if (parsed.ok && parsed.url.startsWith("http:") && !isLoopback(new URL(parsed.url).hostname)) {
    return { ok: false, expected: "must be an https:// URL: Redfish requests carry the BMC's credentials (http:// only to a loopback address, e.g. a local tunnel)" };
  }
  return parsed;
}

function isLoopback(hostname: string): boolean {
  return hostname === "localhost" || hostname === "[::1]" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/u.test(hostname);
}
