// Loaded into plugpool's process by the bench (--import, as plain JavaScript: see probeModule in
// plugpool-process.ts): counts the bytes allocated between a "start" and a "stop" message on the IPC channel,
// i.e. the garbage a batch of calls makes. Allocated = heap used at the end − heap used at the start + what
// every GC in between freed (v8.GCProfiler reports the heap before and after each one). The bench closes the
// channel before it stops the process, so the listener never keeps it alive. It also counts what young collections
// moved to the old generation meanwhile: a full collection starts once the old generation has grown by a margin, so
// the part of a CA loop that moves the most tends to be where the full collections fall. A "heap" message answers what the
// V8 heap holds and reserves, and the memory outside it, so that the RSS can be told apart.
import { GCProfiler, getHeapSpaceStatistics, getHeapStatistics, type GCProfilerResult } from "node:v8";

type HeapState = GCProfilerResult["statistics"][number]["beforeGC"];

/** Bytes in use in the old generation: where a young collection moves what survived it twice. */
function oldBytes(state: HeapState): number {
  return state.heapSpaceStatistics.filter((s) => s.spaceName === "old_space" || s.spaceName === "large_object_space").reduce((sum, s) => sum + s.spaceUsedSize, 0);
}

let profiler: GCProfiler | undefined;
let usedAtStart = 0;

process.on("message", (message) => {
  if (message === "start") {
    profiler?.stop();
    profiler = new GCProfiler();
    profiler.start();
    usedAtStart = getHeapStatistics().used_heap_size;
    process.send?.({ started: true });
  } else if (message === "stop" && profiler !== undefined) {
    const usedAtEnd = getHeapStatistics().used_heap_size;
    const { statistics } = profiler.stop();
    profiler = undefined;
    const freed = statistics.reduce((sum, gc) => sum + gc.beforeGC.heapStatistics.usedHeapSize - gc.afterGC.heapStatistics.usedHeapSize, 0);
    const isYoung = (gc: (typeof statistics)[number]): boolean => gc.gcType === "Scavenge" || gc.gcType === "MinorMarkSweep";
    // The main thread's GC pauses, young (scavenges) and old (mark-compact, its incremental steps included).
    const pauseMs = (young: boolean): number => statistics.filter((gc) => isYoung(gc) === young).reduce((sum, gc) => sum + gc.cost, 0) / 1000;
    const fullGcs = statistics.filter((gc) => gc.gcType === "MarkSweepCompact").length;
    const promotedBytes = statistics.filter(isYoung).reduce((sum, gc) => sum + oldBytes(gc.afterGC) - oldBytes(gc.beforeGC), 0);
    process.send?.({ allocatedBytes: usedAtEnd - usedAtStart + freed, youngGcMs: pauseMs(true), oldGcMs: pauseMs(false), fullGcs, promotedBytes });
  } else if (message === "heap") {
    const heap = getHeapStatistics();
    const young = getHeapSpaceStatistics().find((s) => s.space_name === "new_space");
    process.send?.({
      totalBytes: heap.total_heap_size,
      usedBytes: heap.used_heap_size,
      youngBytes: young?.space_size ?? 0,
      externalBytes: process.memoryUsage().external,
    });
  }
});
