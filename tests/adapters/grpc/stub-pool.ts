// A Pool that answers from a few lines of test code, for the transport suites: what they check (limits,
// status codes, TLS) does not depend on the domain's decisions.
import type { Pool } from "../../../src/domain/index.ts";
import { PlugpoolError } from "../../../src/domain/index.ts";
import { untilAborted } from "../../../src/domain/lock.ts";

/**
 * One group "workers" (0..2) with no machines up; `overrides` replace single methods. Only what the gRPC
 * routes call is there.
 */
export function stubPool(overrides: Partial<Pool> = {}): Pool {
  const workers = { id: "workers", minSize: 0, maxSize: 2, debug: "" };
  const known = (id: string) => {
    if (id !== workers.id) throw new PlugpoolError("node-group-not-found", `node group "${id}" is not configured`);
  };
  const routed: Partial<Pool> = {
    nodeGroups: () => [workers],
    nodeGroupForNode: () => undefined,
    targetSize: (id) => {
      known(id);
      return 0;
    },
    increaseSize: (id) => {
      known(id);
      return Promise.resolve();
    },
    // As the domain words it: every ref of the request, then the first unknown one.
    deleteNodes: (id, nodes) => {
      known(id);
      const what = `deleting ${nodes.map((n) => n.name || n.providerID).join(", ")} from node group "${id}"`;
      const first = nodes[0];
      return Promise.reject(new PlugpoolError(
        "instance-not-found",
        `${what}: node ${first?.name ?? ""} (providerID "${first?.providerID ?? ""}") is not a machine of this group`,
      ));
    },
    decreaseTargetSize: (id) => {
      known(id);
      return Promise.resolve();
    },
    instances: (id) => {
      known(id);
      return [];
    },
    template: () => {
      throw new PlugpoolError("internal", "no template in the stub pool");
    },
    gpuLabel: () => "example.com/gpu",
    gpuTypes: () => [],
    // Hangs until the call's signal aborts, as a Refresh does while a plug never answers.
    refresh: (options) => untilAborted(new Promise<void>(() => undefined), options?.signal),
  };
  return { ...routed, ...overrides } as Pool;
}
