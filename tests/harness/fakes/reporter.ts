import type { PoolEvent, Reporter } from "../../../src/domain/index.ts";

/** Keeps every reported event, in order. */
export class RecordingReporter implements Reporter {
  readonly events: PoolEvent[] = [];
  /** Runs synchronously at each report. */
  onReport: ((event: PoolEvent) => void) | undefined;

  report(event: PoolEvent): void {
    this.events.push(event);
    this.onReport?.(event);
  }

  /** The events of one type, typed. */
  of<T extends PoolEvent["type"]>(type: T): Extract<PoolEvent, { type: T }>[] {
    return this.events.filter((e): e is Extract<PoolEvent, { type: T }> => e.type === type);
  }

  clear(): void {
    this.events.length = 0;
  }
}
