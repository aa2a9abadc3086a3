// Shelly Gen2+ Digest authentication, as the devices ask for it
// (https://shelly-api-docs.shelly.cloud/gen2/General/Authentication): RFC 7616 with SHA-256 only, qop "auth",
// the realm is the device id and the user is always "admin". Firmware 2.0 and later take one nonce for many
// requests with an increasing nc; older firmware wants a new challenge per request, which a reused nonce
// simply gets (one more round trip), so the client always tries the nonce it holds first.
import { createHash, randomBytes } from "node:crypto";

export const SHELLY_USERNAME = "admin";

export interface ShellyChallenge {
  readonly realm: string;
  readonly nonce: string;
}

// A Shelly challenge is about 120 characters; a much longer value is not one worth parsing.
const MAX_CHALLENGE_LENGTH = 1024;

/**
 * The challenge of a `WWW-Authenticate` value, or undefined when it is not a Digest challenge this client can
 * answer (another scheme, another algorithm than SHA-256, a qop without "auth", a missing realm or nonce).
 */
export function parseShellyChallenge(header: string | null): ShellyChallenge | undefined {
  if (header === null || header.length > MAX_CHALLENGE_LENGTH || !/^\s*digest\s/iu.test(header)) return undefined;
  const params = new Map<string, string>();
  for (const m of header.matchAll(/([a-z0-9_-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]*))/giu)) {
    params.set((m[1] ?? "").toLowerCase(), (m[2] ?? m[3] ?? "").replace(/\\(.)/gu, "$1"));
  }
  const realm = params.get("realm");
  const nonce = params.get("nonce");
  const qops = (params.get("qop") ?? "auth").split(",").map((q) => q.trim().toLowerCase());
  if (realm === undefined || nonce === undefined || params.get("algorithm")?.toUpperCase() !== "SHA-256" || !qops.includes("auth")) return undefined;
  return { realm, nonce };
}

const sha256 = (text: string): string => createHash("sha256").update(text, "utf8").digest("hex");
const quote = (value: string): string => `"${value.replace(/["\\]/gu, "\\$&")}"`;

/** One nonce of one device, used with an increasing nonce count until the device asks again. */
export interface ShellyDigestSession {
  readonly challenge: ShellyChallenge;
  /** The `Authorization` value for the next request (each call counts one use of the nonce). */
  authorization(password: string, method: string, uri: string): string;
}

export function createShellyDigestSession(challenge: ShellyChallenge): ShellyDigestSession {
  let count = 0;
  return {
    challenge,
    authorization(password, method, uri) {
      count += 1;
      const nc = count.toString(16).padStart(8, "0");
      const cnonce = randomBytes(12).toString("hex");
      const { realm, nonce } = challenge;
      const ha1 = sha256(`${SHELLY_USERNAME}:${realm}:${password}`);
      const response = sha256(`${ha1}:${nonce}:${nc}:${cnonce}:auth:${sha256(`${method}:${uri}`)}`);
      return `Digest username=${quote(SHELLY_USERNAME)}, realm=${quote(realm)}, nonce=${quote(nonce)}, uri=${quote(uri)}, algorithm=SHA-256, qop=auth, nc=${nc}, cnonce=${quote(cnonce)}, response=${quote(response)}`;
    },
  };
}
