// One collection of the API kept in memory: list once (in pages), then watch from the list's resourceVersion.
// A watch that ends normally (server timeout, the client's 30 s idle timeout) resumes from the last
// resourceVersion seen, without a list. A watch whose resourceVersion expired (410) relists at once.
// Any other failure (apiserver gone, refused) relists after a backoff that doubles up to a limit, so an
// apiserver restart is caught up with by itself. Each reflector records when it last heard from the apiserver,
// so that a view whose watches keep failing can tell it is no longer current.
import { setTimeout as sleep } from "node:timers/promises";
import type { Watch } from "@kubernetes/client-node";
import { metaOf, record, text } from "./wire.ts";

export interface RetrySettings {
  readonly initialMs: number;
  readonly maxMs: number;
}

export const defaultRetry: RetrySettings = { initialMs: 500, maxMs: 30_000 };

/** Longest wait for a whole list, every page; one that hangs would otherwise stop the reflector for good. */
const listTimeoutMs = 60_000;

/**
 * Objects per page of a list, as kubectl's --chunk-size. A cluster's Nodes in one answer can be tens of MB (each
 * carries its images and managedFields); in pages, only one page is held as parsed objects at a time. The pages
 * of one list are one snapshot: the apiserver serves them all at the first page's resourceVersion
 * (https://kubernetes.io/docs/reference/using-api/api-concepts/#retrieving-large-results-sets-in-chunks).
 */
export const LIST_PAGE_SIZE = 500;

/** Which page of a list to answer, in client-node's list parameters. */
export interface ListPage {
  readonly limit: number;
  /** The token from the page before; absent for the first page. */
  readonly _continue?: string;
}

export interface ListAnswer {
  readonly items: readonly unknown[];
  readonly metadata?: { readonly resourceVersion?: string; readonly _continue?: string };
}

/** Requests made so far: list requests (one a page) and watch starts. */
export interface RequestStats {
  lists: number;
  watches: number;
}

export interface ReflectorSource<V> {
  /** Watch path, e.g. `/api/v1/nodes`. */
  readonly path: string;
  readonly labelSelector?: string;
  readonly fieldSelector?: string;
  /** Lists one page of the collection (with the same selectors), aborting when `signal` does. */
  list(page: ListPage, signal: AbortSignal): Promise<ListAnswer>;
  /** The view kept for an object; undefined drops the object. */
  convert(object: unknown): V | undefined;
}

export interface ReflectorDeps {
  readonly watch: Watch;
  readonly stats: RequestStats;
  readonly retry: RetrySettings;
  /** After every change to the collection, including the first list. */
  readonly onChange: () => void;
  readonly onError: (error: unknown) => void;
  /** Epoch ms, for the time of the last contact. */
  readonly now: () => number;
}

export interface Reflector<V> {
  /** Views by `namespace/name` (by `name` for cluster-scoped objects). */
  readonly items: ReadonlyMap<string, V>;
  /** The first list has completed. Stays true while catching up after a failure. */
  synced(): boolean;
  /**
   * Epoch ms of the last answer from the apiserver: a list, a watch accepted, any watch event (bookmarks too),
   * or a watch the apiserver ended. Undefined before the first.
   */
  lastContact(): number | undefined;
  /**
   * Resolves true once the items are as of `resourceVersion` or later (a list or an event, bookmarks too, at or
   * past it); false when `signal` aborts first, or when either version is not a number.
   */
  caughtUp(resourceVersion: string, signal: AbortSignal): Promise<boolean>;
  start(): void;
  stop(): Promise<void>;
}

type WatchEnd = { readonly kind: "closed" } | { readonly kind: "expired" } | { readonly kind: "failed"; readonly error: unknown };

export function objectKey(namespace: string, name: string): string {
  return namespace === "" ? name : `${namespace}/${name}`;
}

/**
 * A resourceVersion as a number to compare. The API calls them opaque; the etcd-backed apiserver hands out etcd
 * revisions, which only grow, and a watch sends its events in their order
 * (https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions). Anything else compares as nothing.
 */
function revision(resourceVersion: string): bigint | undefined {
  return /^\d{1,20}$/.test(resourceVersion) ? BigInt(resourceVersion) : undefined;
}

/** What the reflector's parts share: the collection as last known, and where its next watch starts. */
interface ReflectorState<V> {
  items: Map<string, V>;
  /** The first list has completed. */
  synced: boolean;
  /** Where the next watch starts; "" calls for a list first. */
  resourceVersion: string;
  /** Events received; one arriving during a watch shows the connection worked, so a failure after it starts a fresh backoff. */
  received: number;
  lastContact: number | undefined;
  /** Ends the watch under way, once the apiserver has accepted it. */
  abortWatch: (() => void) | undefined;
}

interface ReflectorContext<V> {
  readonly source: ReflectorSource<V>;
  readonly deps: ReflectorDeps;
  readonly state: ReflectorState<V>;
  /** Called whenever resourceVersion moves on. */
  readonly progress: Set<() => void>;
}

export function createReflector<V>(source: ReflectorSource<V>, deps: ReflectorDeps): Reflector<V> {
  const state: ReflectorState<V> = {
    items: new Map(), synced: false, resourceVersion: "", received: 0, lastContact: undefined, abortWatch: undefined,
  };
  const ctx: ReflectorContext<V> = { source, deps, state, progress: new Set() };
  let running: Promise<void> | undefined;
  let stopping = new AbortController();
  return {
    get items() {
      return state.items;
    },
    synced: () => state.synced,
    lastContact: () => state.lastContact,
    caughtUp(target, signal) {
      const wanted = revision(target);
      if (wanted === undefined) return Promise.resolve(false);
      return whenReached(ctx.progress, () => (revision(state.resourceVersion) ?? -1n) >= wanted, signal);
    },
    start() {
      if (running !== undefined) return;
      stopping = new AbortController();
      running = run(ctx, stopping.signal);
    },
    async stop() {
      stopping.abort();
      state.abortWatch?.();
      await running;
      running = undefined;
    },
  };
}

function heard(ctx: ReflectorContext<unknown>): void {
  ctx.state.lastContact = ctx.deps.now();
}

function advanced(ctx: ReflectorContext<unknown>): void {
  for (const listener of ctx.progress) listener();
}

/** Watches, listing first whenever there is no resourceVersion to watch from, until `signal` aborts; after a failure, relists after a backoff. */
async function run<V>(ctx: ReflectorContext<V>, signal: AbortSignal): Promise<void> {
  const { state, deps } = ctx;
  // A function, not the property: stop() may abort during any await below.
  const stopped = (): boolean => signal.aborted;
  let delayMs = 0;
  while (!stopped()) {
    if (delayMs > 0) {
      await sleep(delayMs, undefined, { signal }).catch(() => undefined);
      if (stopped()) return;
    }
    try {
      if (state.resourceVersion === "") await list(ctx, signal);
      if (stopped()) return;
      const before = state.received;
      const end = await watchOnce(ctx, signal);
      if (stopped()) return;
      if (state.received > before) delayMs = 0;
      if (end.kind === "failed") throw end.error;
      if (end.kind === "expired") state.resourceVersion = "";
      delayMs = 0;
    } catch (error) {
      if (stopped()) return;
      deps.onError(error);
      state.resourceVersion = "";
      delayMs = delayMs === 0 ? deps.retry.initialMs : Math.min(delayMs * 2, deps.retry.maxMs);
    }
  }
}

/** Lists the whole collection, page by page, in place of the items. */
async function list<V>(ctx: ReflectorContext<V>, signal: AbortSignal): Promise<void> {
  const { source, deps, state } = ctx;
  const bounded = AbortSignal.any([signal, AbortSignal.timeout(listTimeoutMs)]);
  // Filled apart and swapped in whole: a list cut short (a page failed, its token expired) leaves the items as
  // they were, and the run loop lists again from the first page.
  const listed = new Map<string, V>();
  let next: string | undefined;
  let version: string;
  do {
    deps.stats.lists += 1;
    const answer = await source.list(next === undefined ? { limit: LIST_PAGE_SIZE } : { limit: LIST_PAGE_SIZE, _continue: next }, bounded);
    heard(ctx);
    for (const object of answer.items) put(source, listed, object);
    version = answer.metadata?.resourceVersion ?? "";
    next = answer.metadata?._continue || undefined;
  } while (next !== undefined);
  state.items = listed;
  state.resourceVersion = version;
  state.synced = true;
  deps.onChange();
  advanced(ctx);
}

function put<V>(source: ReflectorSource<V>, into: Map<string, V>, object: unknown): void {
  const meta = metaOf(object);
  if (meta === undefined) return;
  const key = objectKey(meta.namespace, meta.name);
  const view = source.convert(object);
  if (view === undefined) into.delete(key);
  else into.set(key, view);
}

/** One watch from the current resourceVersion, taking its events in; resolves with how it ended. */
function watchOnce<V>(ctx: ReflectorContext<V>, signal: AbortSignal): Promise<WatchEnd> {
  const { source, deps, state } = ctx;
  deps.stats.watches += 1;
  return new Promise((resolve) => {
    let ended = false;
    let end: WatchEnd = { kind: "closed" };
    const onStop = (): void => { resolve(end); };
    const onEvent = (type: string, object: unknown): void => {
      end = takeEvent(ctx, type, object) ?? end;
    };
    const onDone = (error: unknown): void => {
      signal.removeEventListener("abort", onStop);
      ended = true;
      state.abortWatch = undefined;
      // Ended by the apiserver. Not client-node's idle timeout: that one means nothing was heard for 30 s.
      if (error === null || error === undefined) heard(ctx);
      if (end.kind === "closed" && error !== null && error !== undefined && !isIdleTimeout(error)) {
        end = (error as { statusCode?: unknown }).statusCode === 410 ? { kind: "expired" } : { kind: "failed", error };
      }
      resolve(end);
    };
    // stop() must not wait for the watch: a proxy that holds back the headers of a quiet watch would keep
    // client-node's call (and so its controller) pending for up to its 30 s idle timeout. Removed when the
    // watch ends: the signal lives as long as the reflector, across every renewal.
    signal.addEventListener("abort", onStop, { once: true });
    const params = {
      resourceVersion: state.resourceVersion,
      allowWatchBookmarks: true,
      // The server ends each watch after 5-10 min; spreading them keeps renewals apart.
      timeoutSeconds: 300 + Math.floor(Math.random() * 300),
      labelSelector: source.labelSelector,
      fieldSelector: source.fieldSelector,
    };
    deps.watch.watch(source.path, params, onEvent, onDone).then(
      (controller) => {
        // Still open when the call returns: the apiserver accepted the watch.
        if (ended || signal.aborted) controller.abort();
        else {
          heard(ctx);
          state.abortWatch = () => { controller.abort(); };
        }
      },
      (error: unknown) => { onDone(error); },
    );
  });
}

/** Takes one watch event into the items. An ERROR event changes nothing: it tells how the watch ends, which is returned. */
function takeEvent<V>(ctx: ReflectorContext<V>, type: string, object: unknown): WatchEnd | undefined {
  const { source, deps, state } = ctx;
  heard(ctx);
  if (type === "ERROR") {
    const code = record(object)?.code;
    return code === 410 ? { kind: "expired" } : { kind: "failed", error: new Error(text(record(object)?.message) ?? "watch error") };
  }
  if (type === "ADDED" || type === "MODIFIED") put(source, state.items, object);
  if (type === "DELETED") {
    const meta = metaOf(object);
    if (meta !== undefined) state.items.delete(objectKey(meta.namespace, meta.name));
  }
  // Bookmarks carry only a resourceVersion (no name), so it is read directly.
  state.resourceVersion = text(record(record(object)?.metadata)?.resourceVersion) ?? state.resourceVersion;
  state.received += 1;
  if (type !== "BOOKMARK") deps.onChange();
  advanced(ctx);
  return undefined;
}

/** Resolves true once `reached()` holds, asked at once and at each call of a `progress` listener; false once `signal` aborts. */
function whenReached(progress: Set<() => void>, reached: () => boolean, signal: AbortSignal): Promise<boolean> {
  if (reached() || signal.aborted) return Promise.resolve(reached());
  return new Promise((resolve) => {
    const finish = (result: boolean): void => {
      progress.delete(check);
      signal.removeEventListener("abort", aborted);
      resolve(result);
    };
    const check = (): void => {
      if (reached()) finish(true);
    };
    const aborted = (): void => { finish(false); };
    progress.add(check);
    signal.addEventListener("abort", aborted, { once: true });
  });
}

/** client-node ends a watch that has been silent for 30 s with a TimeoutError: a normal end, not a failure. */
function isIdleTimeout(error: unknown): boolean {
  return (error as { name?: unknown }).name === "TimeoutError";
}
