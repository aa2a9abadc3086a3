// Credentials of the test control plane: the service-account signing key, the static tokens of
// the admin and the control-plane components, and kubeconfig files that carry them.
import { KubeConfig } from "@kubernetes/client-node";
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";

export interface StaticIdentity {
  readonly user: string;
  readonly groups: readonly string[];
  readonly token: string;
}

export interface PlaneCredentials {
  readonly serviceAccountPublicKey: string;
  readonly serviceAccountPrivateKey: string;
  readonly tokenFile: string;
  readonly admin: StaticIdentity;
  /** Users that the bootstrap RBAC policy already grants each component's rights. */
  readonly controllerManager: StaticIdentity;
  readonly scheduler: StaticIdentity;
}

/** Writes the key pair and token file into `dir` (files readable by the owner only). */
export function writeCredentials(dir: string): PlaneCredentials {
  const { publicKey, privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const serviceAccountPublicKey = join(dir, "service-account.pub");
  const serviceAccountPrivateKey = join(dir, "service-account.key");
  writeSecret(serviceAccountPublicKey, publicKey.export({ type: "spki", format: "pem" }).toString());
  writeSecret(serviceAccountPrivateKey, privateKey.export({ type: "pkcs1", format: "pem" }).toString());

  const admin = identity("plugpool-test-admin", ["system:masters"]);
  const controllerManager = identity("system:kube-controller-manager", []);
  const scheduler = identity("system:kube-scheduler", []);
  const tokenFile = join(dir, "tokens.csv");
  // kube-apiserver --token-auth-file: token,user,uid[,"group1,group2"]
  const line = (id: StaticIdentity): string =>
    [id.token, id.user, id.user, ...(id.groups.length > 0 ? [`"${id.groups.join(",")}"`] : [])].join(",");
  writeSecret(tokenFile, [admin, controllerManager, scheduler].map(line).join("\n") + "\n");
  return { serviceAccountPublicKey, serviceAccountPrivateKey, tokenFile, admin, controllerManager, scheduler };
}

/** A KubeConfig for `server` that trusts only `caPem` and authenticates with a bearer token. */
export function tokenKubeConfig(server: string, caPem: string, user: string, token: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: "plugpool-test", server, caData: Buffer.from(caPem).toString("base64"), skipTLSVerify: false }],
    users: [{ name: user, token }],
    contexts: [{ name: user, cluster: "plugpool-test", user }],
    currentContext: user,
  });
  return kc;
}

/** Writes `kc` as a kubeconfig file (it holds a token, so owner-only). */
export function writeKubeconfig(path: string, kc: KubeConfig): string {
  writeSecret(path, kc.exportConfig());
  return path;
}

function identity(user: string, groups: readonly string[]): StaticIdentity {
  return { user, groups, token: randomBytes(32).toString("hex") };
}

function writeSecret(path: string, content: string): void {
  writeFileSync(path, content, { mode: 0o600 });
}
