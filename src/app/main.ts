#!/usr/bin/env node
// The command line, and the only module that touches the process: arguments, environment, signals, exit.
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import type { KubeConfig } from "@kubernetes/client-node";
import { ConfigError, loadConfigFile } from "./config/index.ts";
import { createLogger, LOG_LEVELS, parseLogLevel } from "./logger.ts";
import { serve } from "./serve.ts";
import { doctor } from "./doctor.ts";
import { loadKubeConfig } from "./kubeconfig.ts";
import { opsUrl } from "./doctor-running.ts";
import { parseDuration } from "./config/duration.ts";
import { energyReport, ReportError, type ReportSource } from "./report.ts";
import { messageOf } from "../domain/errors.ts";

const HELP = `plugpool — a cluster-autoscaler cloud provider (externalgrpc) for machines switched by ESPHome, Shelly, Home Assistant or Redfish

Usage:
  plugpool serve  [--config FILE] [--kubeconfig FILE] [--dry-run]
                  run the provider (the default command)
  plugpool doctor [--config FILE] [--kubeconfig FILE]   check config, plugs and cluster access; changes nothing
  plugpool report [--window 24h] [--metrics-url URL | --prometheus URL | --config FILE]
                  per machine: hours on, kWh used and kWh avoided, from a running plugpool (its counters since
                  it started; default its /metrics on the config's opsListen) or from Prometheus (over the window)
  plugpool --version
  plugpool --help

Options:
  --config FILE       configuration file (default /etc/plugpool/config.yaml)
  --kubeconfig FILE   kubeconfig to use (default: $KUBECONFIG, ~/.kube/config, or the in-cluster ServiceAccount)
  --log-level LEVEL   error, warn, info or debug, in any letter case (default info)
  --dry-run           serve: observe only. Answer cluster-autoscaler and read plugs and cluster, but switch no
                      plug, create no pod, delete no Node and write no record; log and record as Events
                      (DryRunPowerOn, DryRunPowerOff, ...) what it would have done. Scale-ups and deletions
                      fail towards cluster-autoscaler.
  --window DURATION   report: the span to add up, e.g. 24h, 168h (default 24h)
  --metrics-url URL   report: a running plugpool's /metrics
  --prometheus URL    report: a Prometheus that scrapes plugpool (its base URL, e.g. http://prometheus:9090)
                      a user:password@ in either URL goes as HTTP Basic authentication

Environment:
  credentials for every power control that names no file of its own:
  PLUGPOOL_PLUG_USERNAME, PLUGPOOL_PLUG_PASSWORD         ESPHome plugs (both or neither)
  PLUGPOOL_SHELLY_PASSWORD                               Shelly devices
  PLUGPOOL_HOME_ASSISTANT_TOKEN                          Home Assistant
  PLUGPOOL_REDFISH_USERNAME, PLUGPOOL_REDFISH_PASSWORD   Redfish BMCs (both or neither)
  POD_NAME, POD_NAMESPACE   serve: the pod's name (plugpool's Lease names its holder by it; default the
                            hostname) and namespace (where cluster-autoscaler's Lease is looked for; set both
                            from the downward API)
`;

function version(): string {
  // Found by walking up from this file, so it works from src/ and from dist/.
  for (let url = new URL("./", import.meta.url); url.pathname !== "/"; url = new URL("../", url)) {
    try {
      const pkg = JSON.parse(readFileSync(new URL("package.json", url), "utf8")) as { name?: string; version?: string };
      if (pkg.name === "plugpool" && pkg.version) return pkg.version;
    } catch {
      // not here; keep walking up
    }
  }
  return "unknown";
}

function kubeConfig(file: string | undefined): KubeConfig {
  if (file) {
    return loadKubeConfig(file, (kc) => {
      kc.loadFromFile(file);
    });
  }
  const list = process.env.KUBECONFIG;
  // Without $KUBECONFIG, only ~/.kube/config can be at fault: the in-cluster configuration is built, not read.
  return loadKubeConfig(list ? `$KUBECONFIG (${list})` : "~/.kube/config", (kc) => {
    kc.loadFromDefault();
  });
}

/** Loads the configuration; problems with the command line's options are reported with the file's, at once. */
function withOptionIssues<T>(issues: readonly string[], load: () => T): T {
  let loaded: T;
  try {
    loaded = load();
  } catch (error) {
    if (error instanceof ConfigError && issues.length > 0) throw new ConfigError([...issues, ...error.issues]);
    throw error;
  }
  if (issues.length > 0) throw new ConfigError(issues);
  return loaded;
}

async function main(argv: readonly string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: [...argv],
    allowPositionals: true,
    options: {
      config: { type: "string", default: "/etc/plugpool/config.yaml" },
      kubeconfig: { type: "string" },
      "log-level": { type: "string", default: "info" },
      "dry-run": { type: "boolean", default: false },
      window: { type: "string", default: "24h" },
      "metrics-url": { type: "string" },
      prometheus: { type: "string" },
      version: { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) {
    process.stdout.write(HELP);
    return 0;
  }
  if (values.version) {
    process.stdout.write(`plugpool ${version()}\n`);
    return 0;
  }
  const command = positionals[0] ?? "serve";
  if (positionals.length > 1 || !["serve", "doctor", "report"].includes(command)) {
    process.stderr.write(`plugpool: unknown command "${positionals.join(" ")}"\n\n${HELP}`);
    return 2;
  }
  if (values["dry-run"] && command !== "serve") {
    process.stderr.write(`plugpool: --dry-run is for serve; ${command} changes nothing anyway\n`);
    return 2;
  }
  if (command === "report") return report(values);
  const level = parseLogLevel(values["log-level"]);
  const config = withOptionIssues(
    level === undefined ? [`--log-level: must be one of ${LOG_LEVELS.join(", ")} (found ${JSON.stringify(values["log-level"])})`] : [],
    () => loadConfigFile(values.config, process.env),
  );
  const kc = kubeConfig(values.kubeconfig);
  if (command === "doctor") {
    const report = await doctor(config, { kubeConfig: kc });
    process.stdout.write(report.text);
    return report.ok ? 0 : 1;
  }
  const logger = createLogger({ level });
  const instance = {
    ...(process.env.POD_NAME && { name: process.env.POD_NAME }),
    ...(process.env.POD_NAMESPACE && { namespace: process.env.POD_NAMESPACE }),
  };
  const running = await serve(config, { kubeConfig: kc, logger, version: version(), dryRun: values["dry-run"], instance });
  await new Promise<void>((resolve) => {
    process.once("SIGTERM", resolve);
    process.once("SIGINT", resolve);
  });
  logger.info("shutting down");
  await running.stop();
  return 0;
}

/** `plugpool report`: reads figures only; the config is read only for the default metrics address. */
async function report(values: { window: string; "metrics-url"?: string; prometheus?: string; config: string }): Promise<number> {
  const windowMs = parseDuration(values.window);
  const issues = [
    ...(windowMs === undefined || windowMs === 0 ? [`--window: must be a duration of more than 0 such as 24h or 168h (found ${JSON.stringify(values.window)})`] : []),
    ...(values["metrics-url"] !== undefined && values.prometheus !== undefined ? ["--metrics-url and --prometheus: give one or neither"] : []),
  ];
  if (issues.length > 0 || windowMs === undefined) {
    process.stderr.write(`plugpool report: ${issues.join("; ")}\n`);
    return 2;
  }
  const source: ReportSource =
    values.prometheus !== undefined
      ? { kind: "prometheus", url: values.prometheus }
      : { kind: "metrics", url: values["metrics-url"] ?? opsUrl(loadConfigFile(values.config, process.env)) };
  try {
    process.stdout.write((await energyReport({ source, windowMs })).text);
    return 0;
  } catch (e) {
    if (!(e instanceof ReportError)) throw e;
    process.stderr.write(`plugpool report: ${e.message}\n`);
    return 1;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (e: unknown) => {
    if (e instanceof ConfigError) {
      process.stderr.write(`plugpool: invalid configuration:\n${e.issues.map((i) => `  ${i}`).join("\n")}\n`);
      process.exitCode = 2;
    } else {
      process.stderr.write(`plugpool: ${messageOf(e)}\n`);
      process.exitCode = 1;
    }
  },
);
