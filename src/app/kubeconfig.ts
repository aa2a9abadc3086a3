// Loads the kubeconfig once, at start-up, and refuses one that would put its own secrets into messages: a server
// URL with credentials is quoted by every error a failed request makes.
import { KubeConfig } from "@kubernetes/client-node";
import { redactUserinfo } from "../adapters/kubernetes/api-errors.ts";

/** The kubeconfig cannot be used. `message` names it and never holds a credential from it. */
export class KubeConfigError extends Error {
  override readonly name = "KubeConfigError";
}

/**
 * A KubeConfig filled by `load` (one of KubeConfig's loaders); `source` names it in errors, e.g. its file.
 * Throws KubeConfigError for a current cluster whose server URL carries credentials.
 */
export function loadKubeConfig(source: string, load: (kc: KubeConfig) => void): KubeConfig {
  const kc = new KubeConfig();
  load(kc);
  const cluster = kc.getCurrentCluster();
  const server = cluster === null ? "" : redactUserinfo(cluster.server);
  if (cluster !== null && server !== cluster.server) {
    // fetch() refuses a URL with credentials (https://fetch.spec.whatwg.org/#dom-request), so no request could
    // succeed, and each failure would quote the URL, credentials and all.
    throw new KubeConfigError(
      `kubeconfig ${source}: the server URL of cluster "${cluster.name}" (${server}) carries credentials; remove them ` +
        "and authenticate through the context's user instead (a token, client certificate or exec plugin)",
    );
  }
  return kc;
}
