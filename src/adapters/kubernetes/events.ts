// What plugpool does, told on the Node it concerns as core/v1 Events (what `kubectl describe node`
// shows). A repeat of the same reason on the same Node within a few minutes bumps the count of the
// Event already written instead of adding another object, as Kubernetes' own recorders do.
// report() never throws and never waits: writes run one at a time in the background, and a failed
// write is counted through onError, nothing more.
import { hostname } from "node:os";
import { CoreV1Api, PatchStrategy, type KubeConfig } from "@kubernetes/client-node";
import type { PoolEvent } from "../../domain/events.ts";
import { describeEvent } from "../../domain/event-catalogue.ts";
import type { Machine } from "../../domain/model.ts";
import type { Reporter } from "../../domain/ports.ts";
import { callBound, callOptions, DEFAULT_WRITE_TIMEOUT_MS, statusOf } from "./api-errors.ts";

export interface KubernetesEventRecorderOptions {
  /** When given, only events about these machines are recorded. */
  readonly machines?: readonly Machine[];
  /** The Node's uid, when known, so the Event refers to that very Node. */
  readonly nodeUid?: (nodeName: string) => string | undefined;
  /** Each failed write (the event is then lost). */
  readonly onError?: (error: unknown) => void;
  /** Repeats within this many ms of the last one are counted on one Event (default 5 min). */
  readonly aggregateWindowMs?: number;
  readonly now?: () => number;
  /** Longest the write of one Event may take (default DEFAULT_WRITE_TIMEOUT_MS); a later one waits for it. */
  readonly writeTimeoutMs?: number;
}

export interface KubernetesEventRecorder extends Reporter {
  /** Records an Event that is not a PoolEvent, as report() does: never throws, never waits, never filtered. */
  record(event: NodeEvent): void;
  /** Resolves once every event reported so far is written (or has failed). */
  flushed(): Promise<void>;
}

export interface NodeEvent {
  readonly node: string;
  readonly type: "Normal" | "Warning";
  readonly reason: string;
  readonly message: string;
}

/** Node Events live in `default`, as the kubelet's own do. */
const eventNamespace = "default";
const component = "plugpool";
/** Beyond this many writes waiting, new events are dropped (and counted as errors): the apiserver is not keeping up. */
const maxQueued = 100;

export function createKubernetesEventRecorder(kc: KubeConfig, options: KubernetesEventRecorderOptions = {}): KubernetesEventRecorder {
  const core = kc.makeApiClient(CoreV1Api);
  const now = options.now ?? Date.now;
  const windowMs = options.aggregateWindowMs ?? 5 * 60_000;
  const writeTimeoutMs = options.writeTimeoutMs ?? DEFAULT_WRITE_TIMEOUT_MS;
  const onError = options.onError ?? (() => undefined);
  const machines = options.machines === undefined ? undefined : new Set(options.machines.map((m) => m.name));
  const instance = hostname();
  const recent = new Map<string, { readonly name: string; count: number; lastAt: number }>();
  let queue: Promise<void> = Promise.resolve();
  let queued = 0;
  let sequence = 0;

  async function write(event: NodeEvent): Promise<void> {
    const at = now();
    const limits = callBound(writeTimeoutMs);
    const key = `${event.node}\u0000${event.reason}`;
    for (const [k, r] of recent) if (at - r.lastAt > windowMs) recent.delete(k);
    const prior = recent.get(key);
    if (prior !== undefined) {
      const body = { count: prior.count + 1, lastTimestamp: new Date(at).toISOString(), message: event.message };
      try {
        await core.patchNamespacedEvent(
          { name: prior.name, namespace: eventNamespace, body },
          callOptions({ signal: limits.signal, contentType: PatchStrategy.MergePatch }),
        );
        prior.count += 1;
        prior.lastAt = at;
        return;
      } catch (error) {
        // Expired meanwhile (Events have a TTL): start a new one.
        if (statusOf(error) !== 404) throw limits.error(`counting Event ${event.reason} on Node "${event.node}"`, error);
      }
    }
    sequence += 1;
    const name = `${eventNamePrefix(event.node)}.${at.toString(16)}${sequence.toString(16)}`;
    const uid = options.nodeUid?.(event.node);
    try {
      await core.createNamespacedEvent({
        namespace: eventNamespace,
        body: {
          metadata: { name, namespace: eventNamespace },
          involvedObject: { apiVersion: "v1", kind: "Node", name: event.node, ...(uid === undefined ? {} : { uid }) },
          type: event.type,
          reason: event.reason,
          message: event.message,
          count: 1,
          firstTimestamp: new Date(at),
          lastTimestamp: new Date(at),
          source: { component },
          reportingComponent: component,
          reportingInstance: instance,
        },
      }, callOptions({ signal: limits.signal }));
    } catch (error) {
      throw limits.error(`recording Event ${event.reason} on Node "${event.node}"`, error);
    }
    recent.set(key, { name, count: 1, lastAt: at });
  }

  function record(event: NodeEvent): void {
    if (queued >= maxQueued) {
      onError(new Error(`dropping Event ${event.reason} on Node "${event.node}": ${maxQueued} writes already waiting`));
      return;
    }
    queued += 1;
    queue = queue.then(() => write(event)).catch(onError).finally(() => { queued -= 1; });
  }

  return {
    report(poolEvent) {
      try {
        const event = nodeEvent(poolEvent);
        if (event === undefined || (machines !== undefined && !machines.has(poolEvent.machine))) return;
        record(event);
      } catch (error) {
        onError(error);
      }
    },
    record(event) {
      try {
        record(event);
      } catch (error) {
        onError(error);
      }
    },
    flushed: () => queue,
  };
}

/** The node part of an Event's name: a DNS subdomain that leaves room for the suffix. */
function eventNamePrefix(node: string): string {
  return node.slice(0, 200).replace(/[-.]+$/, "");
}

/** The Event a PoolEvent becomes on its Node, or undefined for those not worth one. */
export function nodeEvent(event: PoolEvent): NodeEvent | undefined {
  const { level, message, onNode } = describeEvent(event);
  if (onNode === undefined) return undefined;
  return { node: onNode.node, type: level === "warning" ? "Warning" : "Normal", reason: onNode.reason, message: message.slice(0, 1024) };
}
