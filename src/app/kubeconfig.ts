// Loads the kubeconfig once, at start-up, and keeps its secrets out of messages: a server URL with credentials,
// quoted by every error a failed request makes, is refused, and a file that does not parse is told by place only.
import { KubeConfig } from "@kubernetes/client-node";
import { redactUserinfo } from "../adapters/kubernetes/api-errors.ts";

/** The kubeconfig cannot be used. `message` names it and never holds a credential from it. */
export class KubeConfigError extends Error {
  override readonly name = "KubeConfigError";
}

/**
 * A KubeConfig filled by `load` (one of KubeConfig's loaders); `source` names it in errors, e.g. its file.
 * Throws KubeConfigError for a file that is not valid YAML and for a current cluster whose server URL carries
 * credentials.
 */
export function loadKubeConfig(source: string, load: (kc: KubeConfig) => void): KubeConfig {
  const kc = new KubeConfig();
  try {
    load(kc);
  } catch (error) {
    throw yamlError(source, error) ?? error;
  }
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

/**
 * js-yaml's error for a file that does not parse, told by its place and reason only: its message goes on with
 * the lines around the fault, which in a kubeconfig hold tokens and passwords. A reason may end by quoting a
 * tag's or an alias's name (`unidentified alias "name"`), so it is cut before that.
 */
function yamlError(source: string, error: unknown): KubeConfigError | undefined {
  const { name, reason, mark } = error as { name?: unknown; reason?: unknown; mark?: { line?: unknown; column?: unknown } };
  if (name !== "YAMLException" || typeof reason !== "string" || typeof mark?.line !== "number" || typeof mark.column !== "number") return undefined;
  const why = reason.split(/\s*(?:"|!<|:\s)/)[0] ?? "";
  return new KubeConfigError(`kubeconfig ${source}: not valid YAML at line ${mark.line + 1}, column ${mark.column + 1} (${why})`);
}
