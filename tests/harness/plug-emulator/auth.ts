// web_server `auth:` as each backend and version enforces it.
// Written independently of the adapter's digest code, so the two check each other.
import { createHash, randomBytes } from "node:crypto";
import type { IncomingMessage } from "node:http";

export type Version = "2025.12" | "2026.1" | "2026.7";
export type Platform = "esp32" | "esp8266";

/**
 * `auth.type` of the config. Before 2026.7 there is no `type` option: "basic" then stands for a plain
 * `auth:` block (the backend decides what it accepts) and "digest" cannot be configured.
 */
export interface AuthConfig {
  readonly type: "basic" | "digest";
  readonly username: string;
  readonly password: string;
}

export type AuthVerdict = { readonly ok: true } | { readonly ok: false; readonly status: 401; readonly headers: Record<string, string>; readonly body: string };

export interface AuthGate {
  check(req: IncomingMessage): AuthVerdict;
  /** Forgets every nonce, as a reboot or the 5-minute lifetime would; the next Digest answer is stale. */
  expireNonces(): void;
}

const REALM = "Login Required";
const NONCE_SLOTS = 8; // IDF digest keeps 8 nonces
const NONCE_LIFETIME_MS = 5 * 60_000;
const REPLAY_WINDOW = 64;
// ESP8266 libb64 inserts a newline every 72 output characters, so Basic fails from 54 bytes of user:pass.
const ASYNC_BASIC_MAX_BYTES = 53;
const IDF_BASIC_MAX_BYTES = 255;

interface Nonce {
  readonly value: string;
  readonly issuedAt: number;
  readonly seenNc: Set<number>;
  maxNc: number;
}

const md5 = (text: string): string => createHash("md5").update(text).digest("hex");

/** Splits `Digest k=v, k="v"` into its parameters. */
function digestParams(header: string): Map<string, string> {
  const params = new Map<string, string>();
  const re = /([a-z0-9_-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]+))/giy;
  re.lastIndex = header.indexOf(" ") + 1;
  for (let m = re.exec(header); m; m = re.exec(header)) {
    params.set((m[1] ?? "").toLowerCase(), (m[2] ?? m[3] ?? "").replace(/\\(.)/g, "$1"));
    while (header[re.lastIndex] === "," || header[re.lastIndex] === " ") re.lastIndex++;
  }
  return params;
}

export function createAuthGate(config: AuthConfig | undefined, version: Version, platform: Platform): AuthGate | undefined {
  if (!config) return undefined;
  if (config.type === "digest" && version !== "2026.7") {
    throw new Error(`auth type "digest" does not exist before ESPHome 2026.7 (asked for ${version})`);
  }
  const typed = version === "2026.7";
  // Which schemes the device accepts and which it asks for.
  const acceptsBasic = !(platform === "esp32" && config.type === "digest");
  const acceptsDigest = platform === "esp8266" ? !(typed && config.type === "basic") : typed && config.type === "digest";
  const challengesDigest = acceptsDigest;
  const basicMaxBytes = platform === "esp8266" ? ASYNC_BASIC_MAX_BYTES : typed ? IDF_BASIC_MAX_BYTES : Infinity;
  const expected = Buffer.from(`${config.username}:${config.password}`, "utf8");
  let nonces: Nonce[] = [];

  function challenge(stale: boolean): AuthVerdict {
    if (!challengesDigest) {
      // IDF answers with its own short text and keeps the connection; the async backend sends no body.
      return platform === "esp32"
        ? { ok: false, status: 401, headers: { "www-authenticate": `Basic realm="${REALM}"`, connection: "keep-alive", "content-type": "text/html" }, body: "No permission -- see authorization schemes" }
        : { ok: false, status: 401, headers: { "www-authenticate": `Basic realm="${REALM}"` }, body: "" };
    }
    const nonce: Nonce = { value: randomBytes(16).toString("hex"), issuedAt: Date.now(), seenNc: new Set(), maxNc: 0 };
    nonces = [...nonces, nonce].slice(-NONCE_SLOTS);
    const algorithm = platform === "esp32" ? ", algorithm=MD5" : "";
    const header = `Digest realm="${REALM}", qop="auth"${algorithm}, nonce="${nonce.value}", opaque="${randomBytes(16).toString("hex")}"${stale ? ", stale=true" : ""}`;
    return { ok: false, status: 401, headers: { "www-authenticate": header }, body: "" };
  }

  function basicOk(token: string): boolean {
    const given = Buffer.from(token, "base64");
    return expected.length <= basicMaxBytes && given.equals(expected);
  }

  /** "ok", "stale" (right answer to a nonce the device no longer knows) or "bad". */
  function digestOk(header: string, req: IncomingMessage, account: AuthConfig): "ok" | "stale" | "bad" {
    const p = digestParams(header);
    const nc = p.get("nc") ?? "";
    const nonceValue = p.get("nonce") ?? "";
    if (p.get("username") !== account.username || p.get("realm") !== REALM || p.get("qop") !== "auth") return "bad";
    if (!/^[0-9a-f]{8}$/i.test(nc) || p.get("uri") !== req.url) return "bad";
    const ha1 = md5(`${account.username}:${REALM}:${account.password}`);
    const ha2 = md5(`${req.method ?? ""}:${req.url ?? ""}`);
    const want = md5(`${ha1}:${nonceValue}:${nc}:${p.get("cnonce") ?? ""}:auth:${ha2}`);
    if (p.get("response") !== want) return "bad";
    const nonce = nonces.find((n) => n.value === nonceValue && Date.now() - n.issuedAt < NONCE_LIFETIME_MS);
    if (!nonce) return "stale";
    const count = Number.parseInt(nc, 16);
    if (nonce.seenNc.has(count) || count <= nonce.maxNc - REPLAY_WINDOW) return "bad";
    nonce.seenNc.add(count);
    nonce.maxNc = Math.max(nonce.maxNc, count);
    return "ok";
  }

  return {
    check(req) {
      const header = req.headers.authorization ?? "";
      const scheme = header.split(" ", 1)[0]?.toLowerCase();
      if (scheme === "basic" && acceptsBasic && basicOk(header.slice(6).trim())) return { ok: true };
      if (scheme === "digest" && acceptsDigest) {
        const verdict = digestOk(header, req, config);
        if (verdict === "ok") return { ok: true };
        return challenge(verdict === "stale");
      }
      return challenge(false);
    },
    expireNonces() {
      nonces = [];
    },
  };
}
