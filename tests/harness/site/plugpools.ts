// The plugpools of a test site, each started again on the same config and ports as often as a test likes: in this
// process (serve(), as the end-to-end scenarios and the sandbox run it), or as its own process of the bundle (as
// the image runs it), with a wall clock the test can step (clock-step.ts).
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { KubeConfig } from "@kubernetes/client-node";
import type { AppConfig } from "../../../src/app/config/index.ts";
import type { LogFields } from "../../../src/app/logger.ts";
import { serve, type Served } from "../../../src/app/serve.ts";
import type { FileLogger, LogLine } from "./plugpool-log.ts";
import { startPlugpoolProcess, type PlugpoolProcess } from "./plugpool-process.ts";

const CLOCK_STEP = join(import.meta.dirname, "clock-step.ts");

export interface SitePlugpool {
  /** Where its log is. */
  readonly logPath: string;
  running(): boolean;
  /** Starts it (again, with the same config and ports); resolves once it serves. Does nothing while it runs. */
  start(): Promise<void>;
  stop(): Promise<void>;
  /** The last lines of its log, for failure messages. */
  logTail(lines?: number): string;
}

/** plugpool in this process. */
export interface ServedPlugpool extends SitePlugpool {
  /** The running plugpool; undefined while stopped. */
  served(): Served | undefined;
  /** Its domain events so far (log lines with an `event` field), optionally of one type. */
  events(type?: string): readonly LogFields[];
}

/** plugpool as its own process. */
export interface ProcessPlugpool extends SitePlugpool {
  /** The process started last; undefined before the first start. */
  process(): PlugpoolProcess | undefined;
  /** SIGKILL, as a crash would end it. */
  kill(): Promise<void>;
  /** SIGSTOP now; the function returned sends SIGCONT, unless the process has been replaced meanwhile. */
  freeze(): () => void;
  /** Steps its wall clock by `ms` (either way), on top of earlier steps; returns the total offset. */
  stepClock(ms: number): number;
}

export interface ServedPlugpoolPlan {
  readonly config: AppConfig;
  /** Who it acts as. */
  readonly kubeConfig: KubeConfig;
  readonly logger: FileLogger;
  /** Where the logger puts every line it writes. */
  readonly lines: readonly LogLine[];
  /** The namespace of its pod, as POD_NAMESPACE would tell it: cluster-autoscaler's Lease would be there. */
  readonly namespace: string;
  /** `serve --dry-run`: it observes only. */
  readonly dryRun?: boolean;
}

export function servedPlugpool(plan: ServedPlugpoolPlan): ServedPlugpool {
  let served: Served | undefined;
  return {
    logPath: plan.logger.path,
    running: () => served !== undefined,
    start: async () => {
      served ??= await serve(plan.config, {
        kubeConfig: plan.kubeConfig, logger: plan.logger, version: "e2e", instance: { namespace: plan.namespace }, ...(plan.dryRun === true && { dryRun: true }),
      });
    },
    stop: async () => {
      const running = served;
      served = undefined;
      await running?.stop();
    },
    logTail: (lines = 40) => plan.logger.tail(lines),
    served: () => served,
    events: (type) => plan.lines.map((l) => l.fields).filter((f) => f.event !== undefined && (type === undefined || f.event === type)),
  };
}

export interface ProcessPlugpoolPlan {
  /** Its pod name (POD_NAME), and the name of its log and clock files in `dir`. */
  readonly name: string;
  readonly dir: string;
  readonly configPath: string;
  readonly kubeconfigPath: string;
}

export function processPlugpool(plan: ProcessPlugpoolPlan): ProcessPlugpool {
  let current: PlugpoolProcess | undefined;
  const logPath = join(plan.dir, `${plan.name}.log`);
  const clockPath = join(plan.dir, `${plan.name}.clock`);
  let offset = 0;
  writeFileSync(clockPath, "0\n");
  return {
    logPath,
    running: () => current?.running() === true,
    start: async () => {
      if (current?.running() === true) return;
      current = await startPlugpoolProcess({
        name: plan.name,
        configPath: plan.configPath,
        kubeconfigPath: plan.kubeconfigPath,
        logPath,
        nodeArgs: ["--import", CLOCK_STEP],
        env: { PLUGPOOL_TEST_CLOCK_FILE: clockPath },
        inheritEnv: true,
        ready: "readyz",
        timeoutMs: 60_000,
      });
    },
    stop: async () => {
      await current?.stop(10_000);
    },
    kill: async () => {
      await current?.close();
    },
    freeze: () => {
      const frozen = current;
      frozen?.freeze();
      return () => {
        if (frozen === current) frozen?.thaw();
      };
    },
    stepClock: (ms) => {
      offset += ms;
      writeFileSync(clockPath, `${offset}\n`);
      return offset;
    },
    logTail: (lines = 40) => current?.tail(lines) ?? "(not started)",
    process: () => current,
  };
}
