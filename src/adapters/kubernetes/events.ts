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
import { callBound, callOptions, DEFAULT_WRITE_TIMEOUT_MS, statusOf, type CallBound } from "./api-errors.ts";

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

/** An Event written lately: a repeat within the window is counted on it. */
interface Recent {
  readonly name: string;
  count: number;
  lastAt: number;
}

/** The recorder's wiring, the Events it wrote lately and its queue of writes. */
interface Recorder {
  readonly core: CoreV1Api;
  readonly options: KubernetesEventRecorderOptions;
  readonly now: () => number;
  readonly windowMs: number;
  readonly writeTimeoutMs: number;
  readonly onError: (error: unknown) => void;
  /** This process, as the Events' reportingInstance. */
  readonly instance: string;
  /** By Node and reason. */
  readonly recent: Map<string, Recent>;
  /** The writes, one after the other; settles once the last one queued has. */
  queue: Promise<void>;
  /** Writes queued and not yet settled. */
  queued: number;
  /** Tells apart the names of Events created in the same millisecond. */
  sequence: number;
}

export function createKubernetesEventRecorder(kc: KubeConfig, options: KubernetesEventRecorderOptions = {}): KubernetesEventRecorder {
  const r: Recorder = {
    core: kc.makeApiClient(CoreV1Api),
    options,
    now: options.now ?? Date.now,
    windowMs: options.aggregateWindowMs ?? 5 * 60_000,
    writeTimeoutMs: options.writeTimeoutMs ?? DEFAULT_WRITE_TIMEOUT_MS,
    onError: options.onError ?? (() => undefined),
    instance: hostname(),
    recent: new Map(),
    queue: Promise.resolve(),
    queued: 0,
    sequence: 0,
  };
  const machines = options.machines === undefined ? undefined : new Set(options.machines.map((m) => m.name));
  return {
    report(poolEvent) {
      try {
        const event = nodeEvent(poolEvent);
        if (event === undefined || (machines !== undefined && !machines.has(poolEvent.machine))) return;
        enqueue(r, event);
      } catch (error) {
        r.onError(error);
      }
    },
    record(event) {
      try {
        enqueue(r, event);
      } catch (error) {
        r.onError(error);
      }
    },
    flushed: () => r.queue,
  };
}

function enqueue(r: Recorder, event: NodeEvent): void {
  if (r.queued >= maxQueued) {
    r.onError(new Error(`dropping Event ${event.reason} on Node "${event.node}": ${maxQueued} writes already waiting`));
    return;
  }
  r.queued += 1;
  r.queue = r.queue.then(() => write(r, event)).catch(r.onError).finally(() => { r.queued -= 1; });
}

/** Counts the event on the Event of its last repeat within the window, or else creates one. */
async function write(r: Recorder, event: NodeEvent): Promise<void> {
  const at = r.now();
  const limits = callBound(r.writeTimeoutMs);
  const key = `${event.node}\u0000${event.reason}`;
  for (const [k, recent] of r.recent) if (at - recent.lastAt > r.windowMs) r.recent.delete(k);
  const prior = r.recent.get(key);
  if (prior !== undefined && (await countRepeat(r, prior, event, at, limits))) return;
  const name = await createEvent(r, event, at, limits);
  r.recent.set(key, { name, count: 1, lastAt: at });
}

/** Bumps the count of the Event `prior`; false when it is gone. */
async function countRepeat(r: Recorder, prior: Recent, event: NodeEvent, at: number, limits: CallBound): Promise<boolean> {
  const body = { count: prior.count + 1, lastTimestamp: new Date(at).toISOString(), message: event.message };
  try {
    await r.core.patchNamespacedEvent(
      { name: prior.name, namespace: eventNamespace, body },
      callOptions({ signal: limits.signal, contentType: PatchStrategy.MergePatch }),
    );
  } catch (error) {
    // Expired meanwhile (Events have a TTL): start a new one.
    if (statusOf(error) !== 404) throw limits.error(`counting Event ${event.reason} on Node "${event.node}"`, error);
    return false;
  }
  prior.count += 1;
  prior.lastAt = at;
  return true;
}

/** Creates an Event of the event on its Node; resolves with its name. */
async function createEvent(r: Recorder, event: NodeEvent, at: number, limits: CallBound): Promise<string> {
  r.sequence += 1;
  const name = `${eventNamePrefix(event.node)}.${at.toString(16)}${r.sequence.toString(16)}`;
  const uid = r.options.nodeUid?.(event.node);
  try {
    await r.core.createNamespacedEvent({
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
        reportingInstance: r.instance,
      },
    }, callOptions({ signal: limits.signal }));
  } catch (error) {
    throw limits.error(`recording Event ${event.reason} on Node "${event.node}"`, error);
  }
  return name;
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
