import type { ClusterView, DeviceSlice, NodeView, PowerOffPodView } from "../../../src/domain/index.ts";
import type { FakeCluster } from "./cluster.ts";

/**
 * The cluster as a watch shows it: a snapshot of the FakeCluster taken at the last `sync()`, so it lags the
 * truth (plugpool's own writes included) until the next one, as a watch cache does. It is always a state the
 * cluster really was in, never a mix.
 */
export class LaggingView implements ClusterView {
  readonly #cluster: FakeCluster;
  #nodes: readonly NodeView[] = [];
  #pods: readonly PowerOffPodView[] = [];

  constructor(cluster: FakeCluster) {
    this.#cluster = cluster;
    this.sync();
  }

  /** The view catches up with the cluster. */
  sync(): void {
    this.#nodes = this.#cluster.nodes();
    this.#pods = this.#cluster.pods();
  }

  nodeNamed(name: string): NodeView | undefined {
    return this.#nodes.find((n) => n.name === name);
  }

  nodesWithProviderID(providerID: string): readonly NodeView[] {
    return providerID === "" ? [] : this.#nodes.filter((n) => n.providerID === providerID);
  }

  nodesCreatedAfter(at: number): readonly NodeView[] {
    return this.#nodes.filter((n) => n.createdAt === undefined || n.createdAt > at);
  }

  powerOffPod(machine: string): PowerOffPodView | undefined {
    return this.#pods.find((p) => p.machine === machine);
  }

  templateSlices(machine: string): readonly DeviceSlice[] | undefined {
    return this.#cluster.templateSlices(machine);
  }

  current(): boolean {
    return this.#cluster.viewCurrent;
  }
}
