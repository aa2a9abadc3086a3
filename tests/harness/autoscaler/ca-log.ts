// Following cluster-autoscaler's log as it is written, and picking out the lines that tell what it decided.
import { closeSync, openSync, readSync } from "node:fs";
import { StringDecoder } from "node:string_decoder";

/** klog's line: `I1130 08:24:27.803198   22167 actuator.go:176] message`. */
const KLOG = /^([IWEF])\d{4} [\d:.]+\s+\d+ [\w.-]+:\d+\] (.*)$/;

/** What CA decided or failed at, in its own words (klog level I/W), without the per-loop chatter. */
const DECISIONS = [
  /^Pod \S+ is unschedulable/,
  /^Scale-up: setting group/,
  /^Successfully added (DeletionCandidateOfClusterAutoscaler|ToBeDeletedByClusterAutoscaler)/,
  /^Scale-down: removing/,
  /^Marking unregistered node/,
  /^Removing \d+ unregistered nodes/,
  /^Scale-up timed out/,
  /^Reverting timed-out scale-up/,
  /^Failed to refresh cloud provider config/,
];

export interface KlogLine {
  readonly level: "I" | "W" | "E" | "F";
  readonly message: string;
}

/** The line's level and message, or undefined for anything that is not a klog line. */
export function parseKlog(line: string): KlogLine | undefined {
  const match = KLOG.exec(line);
  if (match === null) return undefined;
  return { level: match[1] as KlogLine["level"], message: match[2] ?? "" };
}

/** Whether a line is worth telling a person: a decision from DECISIONS, or any error. */
export function isDecision(line: KlogLine): boolean {
  return line.level === "E" || line.level === "F" || DECISIONS.some((d) => d.test(line.message));
}

/** Calls `onLine` with each complete line appended to the file at `path`, polling every `everyMs`. */
export function followLog(path: string, onLine: (line: string) => void, everyMs = 100): { stop(): void } {
  let offset = 0;
  let partial = "";
  const buffer = Buffer.alloc(64 * 1024);
  const decoder = new StringDecoder("utf8");
  const poll = (): void => {
    let fd: number;
    try {
      fd = openSync(path, "r");
    } catch {
      return; // not written yet, or removed at the end
    }
    try {
      for (;;) {
        const read = readSync(fd, buffer, 0, buffer.length, offset);
        if (read === 0) break;
        offset += read;
        const lines = (partial + decoder.write(buffer.subarray(0, read))).split("\n");
        partial = lines.pop() ?? "";
        for (const line of lines) onLine(line);
      }
    } finally {
      closeSync(fd);
    }
  };
  const timer = setInterval(poll, everyMs);
  return {
    stop: () => {
      clearInterval(timer);
      poll();
    },
  };
}
