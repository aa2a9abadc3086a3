// What each device asked for when it challenged, and the Authorization it gets from then on. Credentials go
// out only in answer to a challenge (RFC 9110 §11.6.1): the first request to a device carries none, so a device
// without `auth:` never sees them. On a 401 the device is remembered as Digest whenever it offers Digest, as
// Basic only when Basic is all it offers, and that scheme is then sent up front. A device that once offered
// Digest never gets Basic, which would hand the password itself to anyone on the path.
import { createDigestSession, parseDigestChallenge, type DigestSession } from "../http-device/digest-auth.ts";

export type AuthScheme = "none" | "basic" | "digest";

export interface Credentials {
  readonly username: string;
  readonly password: string;
}

/** What to do after a 401: send again (with what was just learnt), or give up and why. */
export type ChallengeVerdict = "retry" | "rejected" | "unanswerable";

export interface DeviceAuth {
  /** The scheme the next request to the device carries. */
  scheme(device: string): AuthScheme;
  /** The `Authorization` value for the next request to the device, if it asked for credentials. */
  authorization(device: string, credentials: Credentials, method: string, uri: string): string | undefined;
  /**
   * Learns from a 401 with this `WWW-Authenticate` value, answered to a request sent with `sent`. `freshNonce`:
   * that request's Digest nonce came from a challenge of the same exchange (so a plain rejection of it is final).
   */
  challenged(device: string, sent: AuthScheme, header: string | null, freshNonce: boolean): ChallengeVerdict;
}

type Known = { readonly scheme: "basic" } | { readonly scheme: "digest"; readonly session: DigestSession };

const offers = (header: string, scheme: string): boolean => new RegExp(`(?:^|[\\s,])${scheme}(?:[\\s,]|$)`, "iu").test(header);

export function createDeviceAuth(): DeviceAuth {
  const known = new Map<string, Known>();
  const offeredDigest = new Set<string>();

  return {
    scheme: (device) => known.get(device)?.scheme ?? "none",
    authorization(device, credentials, method, uri) {
      const entry = known.get(device);
      if (entry === undefined) return undefined;
      if (entry.scheme === "digest") return entry.session.authorization(credentials, method, uri);
      return `Basic ${Buffer.from(`${credentials.username}:${credentials.password}`, "utf8").toString("base64")}`;
    },
    challenged(device, sent, header, freshNonce) {
      const text = header ?? "";
      if (offers(text, "digest")) offeredDigest.add(device);
      const digest = parseDigestChallenge(header);
      if (digest !== undefined) {
        // A rejected nonce that was not fresh may just be forgotten (a reboot); a fresh one means wrong credentials.
        if (sent === "digest" && !digest.stale && freshNonce) return "rejected";
        known.set(device, { scheme: "digest", session: createDigestSession(digest) });
        return "retry";
      }
      if (offeredDigest.has(device) || !offers(text, "basic")) return "unanswerable";
      if (sent === "basic") return "rejected";
      known.set(device, { scheme: "basic" });
      return "retry";
    },
  };
}
