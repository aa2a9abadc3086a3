// A throwaway PKI for mTLS tests: a CA, a server certificate for 127.0.0.1/localhost and client certificates,
// made with the openssl command line into a temp dir.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface Pki {
  readonly dir: string;
  /** Paths of PEM files. */
  readonly ca: string;
  readonly serverCert: string;
  readonly serverKey: string;
  readonly clientCert: string;
  readonly clientKey: string;
  /** A CA that issued none of the above: a client that trusts only it must refuse the server. */
  readonly strangerCa: string;
  /** A client certificate signed by a different CA (must be refused). */
  readonly strangerCert: string;
  readonly strangerKey: string;
  read(path: string): Buffer;
  /** Issues a client certificate from the configured CA with this subjectAltName (e.g. "DNS:a,URI:b"). */
  issueClient(name: string, subjectAltName: string): { readonly cert: string; readonly key: string };
}

function openssl(dir: string, args: readonly string[]): void {
  execFileSync("openssl", args, { cwd: dir, stdio: "pipe" });
}

function issue(dir: string, name: string, ca: string, subject: string, ext: string): void {
  openssl(dir, ["req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", `${name}.key`, "-out", `${name}.csr`, "-subj", subject]);
  writeFileSync(join(dir, `${name}.ext`), ext);
  openssl(dir, [
    "x509", "-req", "-in", `${name}.csr`, "-CA", `${ca}.crt`, "-CAkey", `${ca}.key`, "-CAcreateserial",
    "-out", `${name}.crt`, "-days", "2", "-extfile", `${name}.ext`,
  ]);
}

export function createPki(): Pki {
  const dir = mkdtempSync(join(tmpdir(), "plugpool-pki-"));
  for (const ca of ["ca", "stranger-ca"]) {
    openssl(dir, ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", `${ca}.key`, "-out", `${ca}.crt`, "-days", "2", "-subj", `/CN=${ca}`]);
  }
  issue(dir, "server", "ca", "/CN=plugpool", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n");
  issue(dir, "client", "ca", "/CN=cluster-autoscaler", "extendedKeyUsage=clientAuth\n");
  issue(dir, "stranger", "stranger-ca", "/CN=stranger", "extendedKeyUsage=clientAuth\n");
  const at = (f: string) => join(dir, f);
  return {
    dir,
    ca: at("ca.crt"),
    serverCert: at("server.crt"),
    serverKey: at("server.key"),
    clientCert: at("client.crt"),
    clientKey: at("client.key"),
    strangerCa: at("stranger-ca.crt"),
    strangerCert: at("stranger.crt"),
    strangerKey: at("stranger.key"),
    read: (path) => readFileSync(path),
    issueClient: (name, subjectAltName) => {
      issue(dir, name, "ca", `/CN=${name}`, `subjectAltName=${subjectAltName}\nextendedKeyUsage=clientAuth\n`);
      return { cert: at(`${name}.crt`), key: at(`${name}.key`) };
    },
  };
}
