// Which client certificates may call, beyond being signed by the configured CA: those naming one of the
// configured names in their subjectAltName.
import type { PeerCertificate } from "node:tls";

export interface CertificateName {
  readonly type: "DNS" | "URI";
  readonly value: string;
}

/**
 * The DNS and URI names of a certificate's subjectAltName. Node writes it as `DNS:a, URI:b, IP Address:c`,
 * quoting a value as a JSON string when it holds a comma, a quote or the like.
 */
export function certificateNames(subjectAltName: string | undefined): CertificateName[] {
  const names: CertificateName[] = [];
  for (const [, type, value = ""] of (subjectAltName ?? "").matchAll(/([^:,]+):("(?:[^"\\]|\\.)*"|[^,]*)(?:, |$)/g)) {
    if (type !== "DNS" && type !== "URI") continue;
    names.push({ type, value: value.startsWith('"') ? (JSON.parse(value) as string) : value });
  }
  return names;
}

/**
 * Undefined when the certificate carries one of `allowed` (DNS names compared without letter case, as DNS
 * does; URIs exactly), else why it is refused, naming what the certificate carries.
 */
export function clientNameRefusal(cert: Pick<PeerCertificate, "subjectaltname">, allowed: readonly string[]): string | undefined {
  const names = certificateNames(cert.subjectaltname);
  const allowedDns = new Set(allowed.map((name) => name.toLowerCase()));
  const matches = names.some(({ type, value }) => (type === "DNS" ? allowedDns.has(value.toLowerCase()) : allowed.includes(value)));
  if (matches) return undefined;
  const carried = names.length === 0 ? "no DNS or URI name" : names.map(({ type, value }) => `${type}:${value}`).join(", ");
  return `the client certificate (${carried}) carries none of the names tls.clientNames allows`;
}
