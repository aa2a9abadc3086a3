import { isDeepStrictEqual } from "node:util";
import type { ConnectRouter, HandlerContext, Interceptor } from "@connectrpc/connect";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Clock, Pool } from "../../domain/index.ts";
import { CloudProvider } from "../../../gen/clusterautoscaler/cloudprovider/v1/externalgrpc/externalgrpc_pb.ts";
import { toConnectError } from "./errors.ts";
import { fromExternalGrpcNode, toInstance, toNodeGroup } from "./proto-mapping.ts";
import { encodeResourceSlice, encodeTemplateNode } from "./k8s-encoding.ts";

export interface RouteDeps {
  readonly pool: Pool;
  readonly clock: Pick<Clock, "now">;
  /** CA's Cleanup call (it sends it when it shuts down). */
  readonly cleanup: () => Promise<void>;
}

/** Every thrown value leaves through the one mapping to gRPC codes. */
export const errorMapping: Interceptor = (next) => async (req) => {
  try {
    return await next(req);
  } catch (e) {
    throw toConnectError(e);
  }
};

/**
 * The domain is told the call ended this much before cluster-autoscaler's deadline (a fifth of the time the call
 * has, at most a second), so that its answer (a Refresh with a device still unread, an IncreaseSize with a switch-on
 * still going) arrives in time rather than the deadline's error.
 */
const ANSWER_MARGIN_MS = 1000;

function callOptions(ctx: Pick<HandlerContext, "signal" | "timeoutMs">): { readonly signal: AbortSignal } {
  const left = ctx.timeoutMs();
  if (left === undefined) return { signal: ctx.signal };
  const answerBy = AbortSignal.timeout(Math.max(0, Math.floor(left - Math.min(ANSWER_MARGIN_MS, left / 5))));
  return { signal: AbortSignal.any([ctx.signal, answerBy]) };
}


function unimplemented(what: string): never {
  // CA maps Unimplemented to "not implemented" and uses its own defaults; for GetOptions that is the point:
  // any answer would zero MaxNodeStartupTime (the proto has no field for it).
  throw new ConnectError(`${what} is not implemented by plugpool`, Code.Unimplemented);
}

const MINUTE_MS = 60_000;

interface EncodedTemplate {
  readonly node: unknown;
  readonly slices: unknown;
  readonly minute: number;
  readonly answer: { readonly nodeBytes: Uint8Array; readonly resourceSliceBytes: Uint8Array[] };
}

/** The externalgrpc CloudProvider service over the domain's Pool: conversion only, no decisions. */
export function cloudProviderRoutes(deps: RouteDeps): (router: ConnectRouter) => void {
  const { pool, clock } = deps;
  // Each group's encoded template, kept while the template stays the same and its conditions' date (whole
  // minutes, a minute or two back) holds: CA asks every loop, and the template changes with the config or a
  // machine's DRA devices only.
  const encoded = new Map<string, EncodedTemplate>();
  const templateAnswer = (id: string): EncodedTemplate["answer"] => {
    const { node, slices } = pool.template(id);
    const minute = Math.floor(clock.now() / MINUTE_MS);
    const kept = encoded.get(id);
    if (kept?.minute === minute && isDeepStrictEqual(kept.node, node) && isDeepStrictEqual(kept.slices, slices)) return kept.answer;
    const answer = {
      nodeBytes: encodeTemplateNode(node, minute * MINUTE_MS),
      resourceSliceBytes: slices.map((s, i) => encodeResourceSlice(s, `${node.name}-${s.pool.name}-${i}`)),
    };
    encoded.set(id, { node, slices, minute, answer });
    return answer;
  };
  return (router) => {
    router.service(CloudProvider, {
      nodeGroups: () => ({ nodeGroups: pool.nodeGroups().map(toNodeGroup) }),
      nodeGroupForNode: (req) => {
        const group = req.node ? pool.nodeGroupForNode(fromExternalGrpcNode(req.node)) : undefined;
        // An empty id means "not managed by this provider"; it is never an error.
        return { nodeGroup: group ? toNodeGroup(group) : { id: "" } };
      },
      pricingNodePrice: () => unimplemented("PricingNodePrice"),
      pricingPodPrice: () => unimplemented("PricingPodPrice"),
      gPULabel: () => ({ label: pool.gpuLabel() }),
      getAvailableGPUTypes: () => ({
        gpuTypes: Object.fromEntries(pool.gpuTypes().map((t) => [t, { typeUrl: "", value: new Uint8Array() }])),
      }),
      cleanup: async () => {
        await deps.cleanup();
        return {};
      },
      refresh: async (_req, ctx) => {
        await pool.refresh(callOptions(ctx));
        return {};
      },
      nodeGroupTargetSize: (req) => ({ targetSize: pool.targetSize(req.id) }),
      nodeGroupIncreaseSize: async (req, ctx) => {
        await pool.increaseSize(req.id, req.delta, callOptions(ctx));
        return {};
      },
      nodeGroupDeleteNodes: async (req, ctx) => {
        await pool.deleteNodes(req.id, req.nodes.map(fromExternalGrpcNode), callOptions(ctx));
        return {};
      },
      nodeGroupDecreaseTargetSize: async (req, ctx) => {
        await pool.decreaseTargetSize(req.id, req.delta, callOptions(ctx));
        return {};
      },
      nodeGroupNodes: (req) => ({ instances: pool.instances(req.id).map(toInstance) }),
      nodeGroupTemplateNodeInfo: (req) => templateAnswer(req.id),
      nodeGroupGetOptions: () => unimplemented("NodeGroupGetOptions"),
    });
  };
}
