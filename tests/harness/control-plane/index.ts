// A real Kubernetes control plane on loopback for tests: etcd and kube-apiserver, optionally
// kube-controller-manager and kube-scheduler, built by tests/harness/control-plane/build.sh (with kubectl).
import { ApiException, CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { tokenKubeConfig, writeCredentials, writeKubeconfig } from "./credentials.ts";
import { createOwnedTempDir, onAbruptExit, startProcess, type ManagedProcess } from "./process.ts";
import { answersOk, freePorts, waitUntilReady } from "./readiness.ts";

export interface ControlPlane {
  /** https://127.0.0.1:<port>; the same across restartApiServer(). */
  readonly server: string;
  /** Admin (system:masters) kubeconfig file; it trusts the API server's own certificate. */
  readonly kubeconfigPath: string;
  /** A fresh admin (system:masters) KubeConfig. */
  admin(): KubeConfig;
  /** Creates the ServiceAccount if it is missing and returns a KubeConfig with a TokenRequest token (default 1 h). */
  asServiceAccount(namespace: string, name: string, expirationSeconds?: number): Promise<KubeConfig>;
  /** Writes a kubeconfig file for `kc`'s identity; removed with the plane. */
  kubeconfigFor(kc: KubeConfig): Promise<string>;
  /** Stops kube-apiserver and starts it again on the same port and etcd; resolves once it is ready. */
  restartApiServer(): Promise<void>;
  /** Stops kube-apiserver (etcd and the rest keep running) until startApiServer(). Idempotent. */
  stopApiServer(): Promise<void>;
  /** Starts a stopped kube-apiserver again on the same port and etcd; resolves once it is ready. Idempotent. */
  startApiServer(): Promise<void>;
  /** Stops every process and removes the plane's files. Idempotent. */
  stop(): Promise<void>;
}

export interface ControlPlaneOptions {
  /**
   * Also run kube-controller-manager with all its default controllers, so service accounts, garbage
   * collection and node lifecycle work; a Node without heartbeats goes NotReady after 10 s.
   */
  readonly controllerManager?: boolean;
  /** Also run kube-scheduler. */
  readonly scheduler?: boolean;
}

const moduleDir = import.meta.dirname;
const serviceAccountIssuer = "https://kubernetes.default.svc.cluster.local";

/** The folder where build.sh puts the binaries pinned by the current go.mod and go.sum. */
export function binaryDir(): string {
  return toolBinaryDir(moduleDir);
}

/**
 * Where a Go tool module's build.sh puts its binaries: keyed, as build.sh does it, by the first 16 hex digits
 * of sha256(go.mod + go.sum), so a version bump builds into a new folder.
 */
export function toolBinaryDir(toolModuleDir: string): string {
  const key = createHash("sha256")
    .update(readFileSync(join(toolModuleDir, "go.mod")))
    .update(readFileSync(join(toolModuleDir, "go.sum")))
    .digest("hex")
    .slice(0, 16);
  // As in build.sh and .ci/node-env.sh, an empty PLUGPOOL_CACHE counts as unset.
  const configured = process.env.PLUGPOOL_CACHE;
  const cache = configured !== undefined && configured !== "" ? configured : join(homedir(), ".cache", "plugpool");
  return join(cache, "bin", key);
}

/** Where build.sh put `name`; throws, saying how to build it, when it is not there. */
export function binaryPath(name: string): string {
  const path = join(binaryDir(), name);
  if (!existsSync(path)) {
    throw new Error(`control-plane binary ${name} not found at ${path}: run tests/harness/control-plane/build.sh first`);
  }
  return path;
}

/** kubectl of the same Kubernetes release, for tests that run the commands a user types. */
export function kubectlPath(): string {
  return binaryPath("kubectl");
}

/** Starts a control plane on free loopback ports; resolves once every process is ready. */
export async function startControlPlane(options: ControlPlaneOptions = {}): Promise<ControlPlane> {
  // Free ports are found before the processes bind them, so another program may take one in between
  // (other suites run beside this one): then the whole plane starts again on new ports.
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(options);
    } catch (error) {
      const portTaken = error instanceof Error && /address already in use/.test(error.message);
      if (!portTaken || attempt === 3) throw error;
    }
  }
}

async function startOnce(options: ControlPlaneOptions): Promise<ControlPlane> {
  const binary = {
    etcd: binaryPath("etcd"),
    apiserver: binaryPath("kube-apiserver"),
    controllerManager: options.controllerManager === true ? binaryPath("kube-controller-manager") : "",
    scheduler: options.scheduler === true ? binaryPath("kube-scheduler") : "",
  };
  const dir = createOwnedTempDir("plugpool-control-plane-");
  const unregister = onAbruptExit(() => { rmSync(dir, { recursive: true, force: true }); });
  const running: ManagedProcess[] = [];
  const log = (name: string): string => join(dir, `${name}.log`);
  const stopAll = async (): Promise<void> => {
    // Clients first, so that the API server has nothing to drain, and etcd last.
    const order = ["kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"];
    const byOrder = (a: ManagedProcess, b: ManagedProcess): number => order.indexOf(a.name) - order.indexOf(b.name);
    for (const child of running.splice(0).sort(byOrder)) await child.stop();
    rmSync(dir, { recursive: true, force: true });
    unregister();
  };

  try {
    const credentials = writeCredentials(dir);
    const port = await freePorts(["etcdClient", "etcdPeer", "apiserver", "controllerManager", "scheduler"]);
    const server = `https://127.0.0.1:${port.apiserver}`;
    const certDir = join(dir, "apiserver-certs");
    const certFile = join(certDir, "apiserver.crt");
    const keyFile = join(certDir, "apiserver.key");

    const etcdUrl = `http://127.0.0.1:${port.etcdClient}`;
    const peerUrl = `http://127.0.0.1:${port.etcdPeer}`;
    const etcd = startProcess("etcd", binary.etcd, [
      "--name=plugpool-test", `--data-dir=${join(dir, "etcd")}`,
      `--listen-client-urls=${etcdUrl}`, `--advertise-client-urls=${etcdUrl}`,
      `--listen-peer-urls=${peerUrl}`, `--initial-advertise-peer-urls=${peerUrl}`,
      `--initial-cluster=plugpool-test=${peerUrl}`,
      "--unsafe-no-fsync", "--log-level=warn",
    ], log("etcd"));
    running.push(etcd);
    await waitUntilReady(etcd, "health", () => answersOk(`${etcdUrl}/health`));

    const apiserverArgs = [
      `--etcd-servers=${etcdUrl}`,
      "--bind-address=127.0.0.1", `--secure-port=${port.apiserver}`, "--advertise-address=127.0.0.1",
      // The API server writes a self-signed serving certificate (and its CA) here and reuses it on
      // restart; clients trust exactly that file.
      `--cert-dir=${certDir}`,
      "--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
      `--token-auth-file=${credentials.tokenFile}`,
      `--service-account-issuer=${serviceAccountIssuer}`,
      `--service-account-key-file=${credentials.serviceAccountPublicKey}`,
      `--service-account-signing-key-file=${credentials.serviceAccountPrivateKey}`,
      "--service-cluster-ip-range=10.96.0.0/16",
      // Power-off pods are privileged; Pod Security admission still decides per namespace.
      "--allow-privileged=true",
      // Endpoints may not hold a loopback address, and nothing in this cluster dials the service.
      "--endpoint-reconciler-type=none",
      // On SIGTERM, end open watches instead of waiting out the 60 s shutdown timeout for them.
      "--shutdown-watch-termination-grace-period=2s",
      "--profiling=false",
    ];
    const startApiServer = async (): Promise<ManagedProcess> => {
      const apiserver = startProcess("kube-apiserver", binary.apiserver, apiserverArgs, log("kube-apiserver"));
      running.push(apiserver);
      await waitUntilReady(apiserver, "/readyz", async () =>
        existsSync(certFile) && answersOk(`${server}/readyz`, readFileSync(certFile, "utf8")));
      return apiserver;
    };
    let apiserver: ManagedProcess | undefined = await startApiServer();
    const ca = readFileSync(certFile, "utf8");
    const admin = (): KubeConfig => tokenKubeConfig(server, ca, credentials.admin.user, credentials.admin.token);
    const kubeconfigPath = writeKubeconfig(join(dir, "admin.kubeconfig"), admin());

    const componentArgs = (name: string, port: number, user: { user: string; token: string }): string[] => [
      `--kubeconfig=${writeKubeconfig(join(dir, `${name}.kubeconfig`), tokenKubeConfig(server, ca, user.user, user.token))}`,
      "--bind-address=127.0.0.1", `--secure-port=${port}`,
      // Loopback-only health endpoints: the API server's certificate covers 127.0.0.1 and is trusted.
      `--tls-cert-file=${certFile}`, `--tls-private-key-file=${keyFile}`,
      // A single instance: leader election would only add a lease that restartApiServer() could lose.
      "--leader-elect=false", "--profiling=false",
    ];
    if (options.controllerManager === true) {
      const controllerManager = startProcess("kube-controller-manager", binary.controllerManager, [
        ...componentArgs("kube-controller-manager", port.controllerManager, credentials.controllerManager),
        // Each controller acts as its own ServiceAccount, as on a kubeadm cluster.
        "--use-service-account-credentials=true",
        `--service-account-private-key-file=${credentials.serviceAccountPrivateKey}`,
        `--root-ca-file=${certFile}`,
        "--node-monitor-period=1s", "--node-monitor-grace-period=10s",
      ], log("kube-controller-manager"));
      running.push(controllerManager);
      const core = admin().makeApiClient(CoreV1Api);
      // The default ServiceAccount appears once the controllers run and their credentials work.
      await waitUntilReady(controllerManager, "default ServiceAccount", async () =>
        await answersOk(`https://127.0.0.1:${port.controllerManager}/healthz`, ca) &&
        core.readNamespacedServiceAccount({ namespace: "default", name: "default" }).then(() => true, () => false));
    }
    if (options.scheduler === true) {
      const scheduler = startProcess("kube-scheduler", binary.scheduler,
        componentArgs("kube-scheduler", port.scheduler, credentials.scheduler), log("kube-scheduler"));
      running.push(scheduler);
      await waitUntilReady(scheduler, "/healthz", () => answersOk(`https://127.0.0.1:${port.scheduler}/healthz`, ca));
    }

    const stopApiServer = async (): Promise<void> => {
      if (apiserver === undefined) return;
      const stopping = apiserver;
      apiserver = undefined;
      await stopping.stop();
      running.splice(running.indexOf(stopping), 1);
    };

    const kubeconfigDir = join(dir, "kubeconfigs");
    mkdirSync(kubeconfigDir);
    let kubeconfigCount = 0;
    let stopped: Promise<void> | undefined;
    return {
      server,
      kubeconfigPath,
      admin,
      asServiceAccount: async (namespace, name, expirationSeconds = 3600) => {
        const core = admin().makeApiClient(CoreV1Api);
        await core.createNamespacedServiceAccount({ namespace, body: { metadata: { name } } }).catch((error: unknown) => {
          if (!(error instanceof ApiException && error.code === 409)) throw error;
        });
        const request = await core.createNamespacedServiceAccountToken({
          namespace, name, body: { spec: { audiences: [], expirationSeconds } },
        });
        const token = request.status?.token;
        if (token === undefined) throw new Error(`TokenRequest for ${namespace}/${name} returned no token`);
        return tokenKubeConfig(server, ca, `system:serviceaccount:${namespace}:${name}`, token);
      },
      kubeconfigFor: (kc) => {
        kubeconfigCount += 1;
        return Promise.resolve(writeKubeconfig(join(kubeconfigDir, `${kubeconfigCount}.kubeconfig`), kc));
      },
      restartApiServer: async () => {
        await stopApiServer();
        apiserver = await startApiServer();
      },
      stopApiServer,
      startApiServer: async () => {
        apiserver ??= await startApiServer();
      },
      stop: () => (stopped ??= stopAll()),
    };
  } catch (error) {
    await stopAll();
    throw error;
  }
}
