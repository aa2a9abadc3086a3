// What the numbers were measured on: results from a 2-core machine shared with builds are not comparable
// with those of an idle workstation, so every run records the machine and how busy it was.
import { availableParallelism, cpus, freemem, loadavg, totalmem } from "node:os";

export interface MachineInfo {
  /** CPUs this process may run on (what `nproc` prints). */
  readonly nproc: number;
  readonly cpuModel: string;
  readonly memoryGiB: number;
  readonly freeMemoryGiB: number;
  readonly node: string;
  /** 1, 5 and 15 minute load averages. */
  readonly loadAverage: readonly [number, number, number];
}

const GIB = 1024 ** 3;

export function machineInfo(): MachineInfo {
  return {
    nproc: availableParallelism(),
    cpuModel: cpus()[0]?.model.trim() ?? "unknown",
    memoryGiB: round(totalmem() / GIB, 1),
    freeMemoryGiB: round(freemem() / GIB, 1),
    node: process.version,
    loadAverage: load(),
  };
}

export function load(): [number, number, number] {
  const [one = 0, five = 0, fifteen = 0] = loadavg();
  return [round(one, 2), round(five, 2), round(fifteen, 2)];
}

export function describeMachine(info: MachineInfo): string {
  return [
    `machine: nproc ${info.nproc}, ${info.cpuModel}, ${info.memoryGiB} GiB (${info.freeMemoryGiB} GiB free), Node ${info.node}`,
    `load average at start: ${info.loadAverage.join(" ")}`,
  ].join("\n");
}

export function round(value: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}
