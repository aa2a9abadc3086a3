// String formats of the configuration: the JSON Schema names them (`"format": "duration"`). ajv checks those
// that are only syntax; those whose value plugpool needs are parsed, once, by the checks. Either way a value
// that fails is reported with the format's `expected`.
import { BlockList, isIP } from "node:net";

const DNS_LABEL = /^[a-z0-9](?:[-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*$/;
const NAME_PART = /^(?:[A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;

export function isDnsLabel(text: string): boolean {
  return text.length <= 63 && DNS_LABEL.test(text);
}

export function isDnsSubdomain(text: string): boolean {
  return text.length <= 253 && DNS_SUBDOMAIN.test(text);
}

/** A label key, taint key or resource name: `[prefix/]name` as Kubernetes' IsQualifiedName checks it. */
export function isQualifiedName(text: string): boolean {
  const parts = text.split("/");
  const name = parts.at(-1) ?? "";
  if (parts.length > 2 || (parts.length === 2 && !isDnsSubdomain(parts[0] ?? ""))) return false;
  return name.length <= 63 && NAME_PART.test(name);
}

export function isLabelValue(text: string): boolean {
  return text === "" || (text.length <= 63 && NAME_PART.test(text));
}

export interface HostPort {
  /** An IP address (IPv6 without brackets) or a host name. */
  readonly host: string;
  readonly port: number;
}

const HOST_PORT = /^(?:\[([^\]]+)\]|([^:[\]]+)):(\d{1,5})$/;

/** Parses `host:port` or `[IPv6]:port`; port 0 asks the system for a free port. */
export function parseHostPort(text: string): HostPort | undefined {
  const [, v6, host, portText = ""] = HOST_PORT.exec(text) ?? [];
  const port = Number(portText);
  if (port > 65535) return undefined;
  if (v6 !== undefined) return isIP(v6) === 6 ? { host: v6, port } : undefined;
  if (host === undefined) return undefined;
  return isIP(host) === 4 || isDnsSubdomain(host.toLowerCase()) ? { host, port } : undefined;
}

const LOOPBACK = new BlockList();
LOOPBACK.addSubnet("127.0.0.0", 8, "ipv4");
LOOPBACK.addAddress("::1", "ipv6");

export function isLoopback(host: string): boolean {
  if (host.toLowerCase() === "localhost") return true;
  const family = isIP(host);
  return family !== 0 && LOOPBACK.check(host, family === 4 ? "ipv4" : "ipv6");
}

/** 0.0.0.0 or the all-zero IPv6 address: listens on every interface. */
export function isWildcard(host: string): boolean {
  return host === "0.0.0.0" || (isIP(host) === 6 && /^[0:]+$/.test(host));
}

const IMAGE = /^\S+$/;

export interface Format {
  readonly test: (text: string) => boolean;
  /** Completes "<path>: …" when the check fails. */
  readonly expected: string;
}

/** The formats whose values the checks parse (and report, should one not parse); ajv leaves them alone. */
export const PARSED_FORMATS = {
  duration: {
    expected: "must be a duration such as 90s, 5m, 1h30m or 500ms (a number with a unit: ns, us, ms, s, m or h; no sign)",
  },
  quantity: {
    expected: 'must be a Kubernetes quantity such as "24", 500m, 64Gi or 1e3',
  },
  "host-port": {
    expected: "must be host:port or [IPv6]:port with a port from 0 to 65535, e.g. 127.0.0.1:8086",
  },
} as const;

/** The formats ajv checks: syntax only, nothing is kept of the value. */
export const SYNTAX_FORMATS: Readonly<Record<string, Format>> = {
  "dns-label": {
    test: isDnsLabel,
    expected: "must be up to 63 lower-case letters, digits or '-', starting and ending with a letter or digit",
  },
  "dns-subdomain": {
    test: isDnsSubdomain,
    expected:
      "must be a valid Node name: up to 253 lower-case letters, digits, '-' or '.', each dot-separated part starting and ending with a letter or digit",
  },
  "qualified-name": {
    test: isQualifiedName,
    expected:
      "must be a valid label key: an optional DNS subdomain and '/', then up to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit (e.g. example.com/pool)",
  },
  "label-value": {
    test: isLabelValue,
    expected: "must be a valid label value: empty, or up to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit",
  },
  image: {
    test: (text) => IMAGE.test(text),
    expected: "must be a container image reference such as busybox:1.37.0 (not empty, no spaces)",
  },
};
