// Shelly Gen2+ authentication as the device enforces it
// (https://shelly-api-docs.shelly.cloud/gen2/General/Authentication): Digest, SHA-256 only, qop "auth",
// the realm is the device id and the user is always "admin". Two ways of answering the challenge are accepted:
// an HTTP `Authorization: Digest` header (HA2 = SHA-256 of method:uri), and for a JSON-RPC frame an `auth`
// object inside it (HA2 = SHA-256 of "dummy_method:dummy_uri", nc 1). Shelly.GetDeviceInfo and /shelly are
// never protected.
//
// Firmware before 2.0 takes each nonce once over HTTP ("this process must be repeated for each request");
// from 2.0 a nonce is good for an hour and 30,000 uses with an increasing nc.
//
// Written independently of the adapter's digest code, so the two check each other.
import { createHash, randomBytes, randomInt } from "node:crypto";
import type { IncomingMessage } from "node:http";

export type Firmware = "1.x" | "2.x";

export const USERNAME = "admin";
const NONCE_LIFETIME_MS = 60 * 60_000;
const NONCE_MAX_USES = 30_000;

const sha256 = (text: string): string => createHash("sha256").update(text, "utf8").digest("hex");

/** The challenge a 401 carries: the header, and the same facts as the error message of a JSON-RPC error 401. */
export interface Challenge {
  readonly header: string;
  readonly message: string;
}

export type AuthVerdict = { readonly ok: true } | { readonly ok: false; readonly challenge: Challenge };

export interface AuthGate {
  /** Checks a request's `Authorization` header, or the `auth` object of its JSON-RPC frame. */
  check(req: IncomingMessage, frameAuth: unknown): AuthVerdict;
  /** Forgets every nonce (a reboot): the next answer to an old one is a new challenge. */
  expireNonces(): void;
}

interface Nonce {
  readonly issuedAt: number;
  lastNc: number;
  uses: number;
}

/** Splits `Digest k=v, k="v"` into its parameters. */
function digestParams(header: string): Map<string, string> {
  const params = new Map<string, string>();
  for (const m of header.slice(header.indexOf(" ") + 1).matchAll(/([a-z0-9_-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]+))/giu)) {
    params.set((m[1] ?? "").toLowerCase(), (m[2] ?? m[3] ?? "").replace(/\\(.)/gu, "$1"));
  }
  return params;
}

export function createAuthGate(realm: string, password: string, firmware: Firmware): AuthGate {
  const ha1 = sha256(`${USERNAME}:${realm}:${password}`);
  let nonces = new Map<string, Nonce>();

  function challenge(): Challenge {
    // 1.x sends a number (seconds-like); 2.x an opaque token.
    const nonce = firmware === "1.x" ? String(randomInt(1_000_000_000, 2_000_000_000)) : randomBytes(30).toString("base64");
    nonces.set(nonce, { issuedAt: Date.now(), lastNc: 0, uses: 0 });
    return {
      header: `Digest qop="auth", realm="${realm}", nonce="${nonce}", algorithm=SHA-256`,
      message: JSON.stringify({ auth_type: "digest", nonce: firmware === "1.x" ? Number(nonce) : nonce, nc: 1, realm, algorithm: "SHA-256" }),
    };
  }

  /** Counts one use of `value` at `nc`; false when the device no longer takes it. */
  function use(value: string, nc: number): boolean {
    const nonce = nonces.get(value);
    if (!nonce || Date.now() - nonce.issuedAt > NONCE_LIFETIME_MS) return false;
    if (firmware === "1.x") {
      nonces.delete(value);
      return true;
    }
    if (nc <= nonce.lastNc || nonce.uses >= NONCE_MAX_USES) return false;
    nonce.lastNc = nc;
    nonce.uses += 1;
    return true;
  }

  function headerOk(header: string, req: IncomingMessage): boolean {
    const p = digestParams(header);
    const nc = p.get("nc") ?? "";
    if (p.get("username") !== USERNAME || p.get("realm") !== realm || p.get("qop") !== "auth") return false;
    if ((p.get("algorithm") ?? "") !== "SHA-256" || !/^[0-9a-f]{8}$/iu.test(nc) || p.get("uri") !== req.url) return false;
    const ha2 = sha256(`${req.method ?? ""}:${req.url ?? ""}`);
    const nonce = p.get("nonce") ?? "";
    if (p.get("response") !== sha256(`${ha1}:${nonce}:${nc}:${p.get("cnonce") ?? ""}:auth:${ha2}`)) return false;
    return use(nonce, Number.parseInt(nc, 16));
  }

  function frameAuthOk(auth: unknown): boolean {
    if (typeof auth !== "object" || auth === null) return false;
    const a = auth as Record<string, unknown>;
    const text = (v: unknown): string => (typeof v === "string" || typeof v === "number" ? String(v) : "");
    if (a.username !== USERNAME || a.realm !== realm || a.algorithm !== "SHA-256") return false;
    const nonce = text(a.nonce);
    const ha2 = sha256("dummy_method:dummy_uri");
    if (a.response !== sha256(`${ha1}:${nonce}:1:${text(a.cnonce)}:auth:${ha2}`)) return false;
    return use(nonce, 1);
  }

  return {
    check(req, frameAuth) {
      const header = req.headers.authorization ?? "";
      const ok = header.toLowerCase().startsWith("digest ") ? headerOk(header, req) : frameAuth !== undefined && frameAuthOk(frameAuth);
      return ok ? { ok: true } : { ok: false, challenge: challenge() };
    },
    expireNonces() {
      nonces = new Map();
    },
  };
}
