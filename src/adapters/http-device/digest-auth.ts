// HTTP Digest authentication (RFC 7616, RFC 2617's qop=auth form) as ESPHome ≥ 2026.7 on ESP32 and the
// ESP8266 async web server ask for it (MD5, qop="auth").
import { createHash, randomBytes } from "node:crypto";

export interface DigestChallenge {
  readonly realm: string;
  readonly nonce: string;
  readonly opaque?: string;
  /** "auth" when the server offers it; undefined for an RFC 2069 challenge without qop. */
  readonly qop?: "auth";
  readonly algorithm: DigestAlgorithm;
  /** The nonce of the rejected request had expired; the credentials themselves were right. */
  readonly stale: boolean;
}

export type DigestAlgorithm = "MD5" | "MD5-sess" | "SHA-256" | "SHA-256-sess";

const HASHES: Record<DigestAlgorithm, string> = { MD5: "md5", "MD5-sess": "md5", "SHA-256": "sha256", "SHA-256-sess": "sha256" };

function isAlgorithm(value: string): value is DigestAlgorithm {
  return Object.hasOwn(HASHES, value);
}

// An ESPHome challenge is about 150 characters; a longer value is not one worth parsing.
const MAX_CHALLENGE_LENGTH = 2048;

/**
 * The Digest challenge in a `WWW-Authenticate` value (which may list several challenges), or
 * undefined when there is none, the value is longer than any device's challenge, or it uses an algorithm or
 * qop this client cannot answer.
 */
export function parseDigestChallenge(header: string | null): DigestChallenge | undefined {
  if (header === null || header.length > MAX_CHALLENGE_LENGTH) return undefined;
  const start = /(?:^|[\s,])digest\s+/iu.exec(header);
  if (!start) return undefined;
  const params = new Map<string, string>();
  const param = /\s*([a-z0-9_-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]*))\s*(?:,|$)/giuy;
  param.lastIndex = start.index + start[0].length;
  for (let m = param.exec(header); m !== null; m = param.exec(header)) {
    params.set((m[1] ?? "").toLowerCase(), (m[2] ?? m[3] ?? "").replace(/\\(.)/gu, "$1"));
  }
  const realm = params.get("realm");
  const nonce = params.get("nonce");
  const algorithm = params.get("algorithm") ?? "MD5";
  const qops = params.get("qop")?.split(",").map((q) => q.trim().toLowerCase());
  if (realm === undefined || nonce === undefined || !isAlgorithm(algorithm)) return undefined;
  if (qops !== undefined && !qops.includes("auth")) return undefined;
  const opaque = params.get("opaque");
  return {
    realm,
    nonce,
    algorithm,
    stale: params.get("stale")?.toLowerCase() === "true",
    ...(opaque === undefined ? {} : { opaque }),
    ...(qops === undefined ? {} : { qop: "auth" as const }),
  };
}

export interface DigestInput {
  readonly algorithm: DigestAlgorithm;
  readonly username: string;
  readonly password: string;
  readonly realm: string;
  readonly nonce: string;
  readonly method: string;
  readonly uri: string;
  readonly qop?: "auth";
  /** Nonce count, 8 hex digits. */
  readonly nc: string;
  readonly cnonce: string;
}

/** The `response` value: H(H(A1):nonce:nc:cnonce:qop:H(A2)), or H(H(A1):nonce:H(A2)) without qop. */
export function digestResponse(input: DigestInput): string {
  const h = (text: string): string => createHash(HASHES[input.algorithm]).update(text, "utf8").digest("hex");
  const secret = h(`${input.username}:${input.realm}:${input.password}`);
  const ha1 = input.algorithm.endsWith("-sess") ? h(`${secret}:${input.nonce}:${input.cnonce}`) : secret;
  const ha2 = h(`${input.method}:${input.uri}`);
  return input.qop === undefined
    ? h(`${ha1}:${input.nonce}:${ha2}`)
    : h(`${ha1}:${input.nonce}:${input.nc}:${input.cnonce}:${input.qop}:${ha2}`);
}

const quote = (value: string): string => `"${value.replace(/["\\]/gu, "\\$&")}"`;

/**
 * One nonce of one device, reused with an increasing nonce count (`nc`) until the device answers
 * `stale=true` or rejects it; then a new session is made from the new challenge.
 */
export interface DigestSession {
  readonly challenge: DigestChallenge;
  /** The `Authorization` value for the next request (each call counts one use of the nonce). */
  authorization(credentials: { readonly username: string; readonly password: string }, method: string, uri: string): string;
}

export function createDigestSession(challenge: DigestChallenge): DigestSession {
  let count = 0;
  return {
    challenge,
    authorization(credentials, method, uri) {
      count += 1;
      const nc = count.toString(16).padStart(8, "0");
      const cnonce = randomBytes(16).toString("hex");
      const { realm, nonce, qop, algorithm, opaque } = challenge;
      const response = digestResponse({ algorithm, username: credentials.username, password: credentials.password, realm, nonce, method, uri, nc, cnonce, ...(qop ? { qop } : {}) });
      const parts = [
        `username=${quote(credentials.username)}`,
        `realm=${quote(realm)}`,
        `nonce=${quote(nonce)}`,
        `uri=${quote(uri)}`,
        `algorithm=${algorithm}`,
        ...(qop ? [`qop=${qop}`, `nc=${nc}`, `cnonce=${quote(cnonce)}`] : []),
        `response=${quote(response)}`,
        ...(opaque === undefined ? [] : [`opaque=${quote(opaque)}`]),
      ];
      return `Digest ${parts.join(", ")}`;
    },
  };
}
