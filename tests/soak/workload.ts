// The soak's workload: Deployments of pods that only the pool's machines can run, created, scaled and deleted at
// random, so that cluster-autoscaler keeps scaling up and down. Deployments (not bare pods) so that CA can drain
// a node, and a cap on the CPU asked for so that the pool can always hold it.
import { AppsV1Api, PatchStrategy, setHeaderOptions, type KubeConfig } from "@kubernetes/client-node";
import type { Random } from "./prng.ts";
import { POOL_LABEL } from "../harness/site/index.ts";

/** Where the workload runs. */
export const WORKLOAD_NAMESPACE = "soak";
/** At most this much CPU (millicores) asked for at once: half the pool of eight 4-CPU machines. */
const CPU_CAP = 16_000;
const MAX_DEPLOYMENTS = 4;
const POD_CPU = [500, 1000, 1500, 2000] as const;
const MERGE = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);

interface Load {
  replicas: number;
  readonly cpu: number;
}

export interface Workload {
  /** One random change; resolves with what it did. */
  step(): Promise<string>;
  /** Deletes every Deployment it made. */
  clear(): Promise<void>;
}

export function createWorkload(admin: KubeConfig, random: Random): Workload {
  const apps = admin.makeApiClient(AppsV1Api);
  const loads = new Map<string, Load>();
  let made = 0;
  const asked = (): number => [...loads.values()].reduce((sum, l) => sum + l.replicas * l.cpu, 0);

  async function create(): Promise<string> {
    const cpu = random.pick(POD_CPU);
    const room = Math.floor((CPU_CAP - asked()) / cpu);
    if (loads.size >= MAX_DEPLOYMENTS || room < 1) return scale();
    const replicas = random.int(1, Math.min(3, room));
    made += 1;
    const name = `load-${made}`;
    await apps.createNamespacedDeployment({
      namespace: WORKLOAD_NAMESPACE,
      body: {
        metadata: { name },
        spec: {
          replicas,
          selector: { matchLabels: { app: name } },
          template: {
            metadata: { labels: { app: name } },
            spec: {
              nodeSelector: { ...POOL_LABEL },
              terminationGracePeriodSeconds: 0,
              containers: [{ name: "app", image: "registry.k8s.io/pause:3.10", resources: { requests: { cpu: `${cpu}m`, memory: "256Mi" } } }],
            },
          },
        },
      },
    });
    loads.set(name, { replicas, cpu });
    return `created ${name}: ${replicas} × ${cpu}m`;
  }

  async function scale(): Promise<string> {
    const names = [...loads.keys()];
    if (names.length === 0) return create();
    const name = random.pick(names);
    const load = loads.get(name);
    if (load === undefined) return "nothing";
    const room = Math.floor((CPU_CAP - asked() + load.replicas * load.cpu) / load.cpu);
    const replicas = random.int(0, Math.min(3, room));
    await apps.patchNamespacedDeploymentScale({ namespace: WORKLOAD_NAMESPACE, name, body: { spec: { replicas } } }, MERGE);
    load.replicas = replicas;
    return `scaled ${name} to ${replicas}`;
  }

  async function remove(name: string): Promise<void> {
    await apps.deleteNamespacedDeployment({ namespace: WORKLOAD_NAMESPACE, name, propagationPolicy: "Background" });
    loads.delete(name);
  }

  return {
    step: async () => {
      const action = random.weighted({ create: 4, scale: 3, delete: 2, clear: 1 });
      switch (action) {
        case "create":
          return create();
        case "scale":
          return scale();
        case "delete": {
          const names = [...loads.keys()];
          if (names.length === 0) return create();
          const name = random.pick(names);
          await remove(name);
          return `deleted ${name}`;
        }
        case "clear": {
          const names = [...loads.keys()];
          for (const name of names) await remove(name);
          return `deleted every deployment (${names.length})`;
        }
      }
    },
    clear: async () => {
      for (const name of [...loads.keys()]) await remove(name).catch(() => undefined);
    },
  };
}
