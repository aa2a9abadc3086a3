// What a BMC's failures tell beyond those every device shares (see device-failure.ts): TLS. Requests to a BMC go
// over TLS checked against the configured CA, so a certificate or handshake failure is named with what to check,
// and it proves the request never left.
import { errorCode, neverConnected, type VendorFailure } from "../http-device/device-failure.ts";

// OpenSSL's verification results as Node reports them (https://nodejs.org/api/tls.html#x509-certificate-error-codes),
// and Node's own for a name the certificate does not carry.
const CERTIFICATE_CODE = /^(?:CERT_|UNABLE_TO_|DEPTH_ZERO_SELF_SIGNED_CERT$|SELF_SIGNED_CERT_IN_CHAIN$|ERR_TLS_CERT_ALTNAME_INVALID$|HOSTNAME_MISMATCH$|INVALID_CA$|PATH_LENGTH_EXCEEDED$|INVALID_PURPOSE$)/u;
// A handshake that failed before any certificate was seen (https to a plain http port, no common protocol).
const HANDSHAKE_CODE = /^(?:ERR_SSL_|EPROTO$)/u;

/** A certificate or handshake failure, in plugpool's words. */
export const tlsFailure: VendorFailure = (code) => {
  if (CERTIFICATE_CODE.test(code)) return { code: "plug-unreachable", detail: `the BMC's TLS certificate is not trusted (${code}): check caFile` };
  if (HANDSHAKE_CODE.test(code)) return { code: "plug-unreachable", detail: `TLS handshake failed (${code})` };
  return undefined;
};

/**
 * The request never left: no connection was made, or TLS refused the BMC before a byte of the request was
 * written (Node writes it once the handshake and the certificate check have passed).
 */
export function neverSent(error: unknown): boolean {
  const code = errorCode(error);
  return neverConnected(error) || (code !== undefined && (CERTIFICATE_CODE.test(code) || HANDSHAKE_CODE.test(code)));
}
