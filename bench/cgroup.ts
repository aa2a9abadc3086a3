// A memory-limited cgroup for plugpool's process, as the kubelet gives a container with `limits.memory`.
// cgroup v2 (memory.max in a child of this process's own cgroup) where the memory controller is there, else
// cgroup v1 (memory.limit_in_bytes). Node sizes its heap from the limit it finds (process.constrainedMemory()),
// so this is the only honest way to see what a limited container does. Needs write access to the hierarchy
// (root, or a delegated subtree); without it the bench says why and measures without the limit.
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export interface MemoryCgroup {
  /** "v2 /sys/fs/cgroup/…" or "v1 /sys/fs/cgroup/memory/…". */
  readonly where: string;
  /** Processes written here run in the cgroup (`echo $$ > procs` before exec). */
  readonly procs: string;
  /** Peak memory charged to the cgroup (pages of the process and its page cache), in bytes. */
  peakBytes(): number;
  /** OOM kills inside the cgroup so far. */
  oomKills(): number;
  remove(): void;
}

/** Our own cgroup path in the hierarchy that carries `controller` ("" = the v2 unified one). */
function ownPath(controller: string): string | undefined {
  for (const line of readFileSync("/proc/self/cgroup", "utf8").split("\n")) {
    const [, controllers, path] = line.split(":");
    if (controllers === undefined || path === undefined) continue;
    if (controller === "" ? line.startsWith("0::") : controllers.split(",").includes(controller)) return path;
  }
  return undefined;
}

function v2Root(): string | undefined {
  for (const root of ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]) {
    if (existsSync(join(root, "cgroup.controllers"))) return root;
  }
  return undefined;
}

const counter = (text: string, key: string): number => Number(new RegExp(`^${key} (\\d+)`, "m").exec(text)?.[1] ?? 0);

/** Creates a child cgroup limited to `limitBytes`; throws with the reason when the machine does not allow it. */
export function createMemoryCgroup(name: string, limitBytes: number): MemoryCgroup {
  const reasons: string[] = [];
  const root = v2Root();
  const own2 = ownPath("");
  if (root !== undefined && own2 !== undefined) {
    const parent = join(root, own2);
    if (readFileSync(join(parent, "cgroup.controllers"), "utf8").split(/\s+/).includes("memory")) {
      try {
        // A v2 parent with processes of its own cannot enable controllers for children ("no internal
        // processes"); the memory controller must already be in its subtree_control.
        const dir = join(parent, name);
        mkdirSync(dir, { recursive: true });
        writeFileSync(join(dir, "memory.max"), String(limitBytes));
        writeFileSync(join(dir, "memory.swap.max"), "0");
        return {
          where: `v2 ${dir}`,
          procs: join(dir, "cgroup.procs"),
          peakBytes: () => Number(readFileSync(join(dir, "memory.peak"), "utf8")),
          oomKills: () => counter(readFileSync(join(dir, "memory.events"), "utf8"), "oom_kill"),
          remove: () => { rmdirSync(dir); },
        };
      } catch (error) {
        reasons.push(`cgroup v2 ${parent}: ${(error as Error).message}`);
      }
    } else {
      reasons.push(`cgroup v2 ${parent}: no memory controller there (it is bound to a v1 hierarchy)`);
    }
  }
  const own1 = ownPath("memory");
  if (own1 !== undefined && existsSync("/sys/fs/cgroup/memory")) {
    const dir = join("/sys/fs/cgroup/memory", own1, name);
    try {
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, "memory.limit_in_bytes"), String(limitBytes));
      return {
        where: `v1 ${dir}`,
        procs: join(dir, "cgroup.procs"),
        peakBytes: () => Number(readFileSync(join(dir, "memory.max_usage_in_bytes"), "utf8")),
        oomKills: () => counter(readFileSync(join(dir, "memory.oom_control"), "utf8"), "oom_kill"),
        remove: () => { rmdirSync(dir); },
      };
    } catch (error) {
      reasons.push(`cgroup v1 ${dir}: ${(error as Error).message}`);
    }
  } else {
    reasons.push("no cgroup v1 memory hierarchy");
  }
  throw new Error(`no memory-limited cgroup can be made here: ${reasons.join("; ")}`);
}
