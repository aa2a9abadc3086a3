// The sandbox (scripts/sandbox.ts, `scripts/dev.sh sandbox`) as a user runs it: a child process that reaches a
// scale-up, and that leaves no process and no file behind however it stops. With the stand-in for
// cluster-autoscaler it runs on any machine; with the real CA only where its binary is built.
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { autoscalerMissing } from "../harness/autoscaler/autoscaler.ts";
import { STAND_IN_NOTICE } from "../harness/autoscaler/stand-in.ts";
import { eventually } from "../harness/eventually.ts";

const repo = join(import.meta.dirname, "..", "..");

interface Run {
  readonly child: ChildProcess;
  output(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const runs: Run[] = [];

function startSandbox(autoscaler: "real" | "stand-in", args: readonly string[]): Run {
  const child = spawn(process.execPath, ["scripts/sandbox.ts", ...args], {
    cwd: repo,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, PLUGPOOL_SANDBOX_AUTOSCALER: autoscaler },
  });
  let output = "";
  child.stdout.on("data", (chunk: Buffer) => { output += chunk.toString(); });
  child.stderr.on("data", (chunk: Buffer) => { output += chunk.toString(); });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once("exit", (code, signal) => { resolve({ code, signal }); });
  });
  const run = { child, output: () => output, exited };
  runs.push(run);
  return run;
}

/** The sandbox's folders, read from what it printed (the kubeconfig and the two logs). */
function foldersOf(output: string): string[] {
  const kubeconfig = /export KUBECONFIG=(\S+)/.exec(output)?.[1];
  const caLog = /Logs: cluster-autoscaler (\S+)/.exec(output)?.[1];
  const plugpoolLog = /^\s+plugpool\s+(\/\S+)$/m.exec(output)?.[1];
  assert.ok(kubeconfig !== undefined && caLog !== undefined && plugpoolLog !== undefined, output);
  return [dirname(kubeconfig), dirname(caLog), dirname(plugpoolLog)];
}

/** Processes whose command line mentions one of `folders`: they belong to the sandbox. */
function processesUsing(folders: readonly string[]): string[] {
  const found: string[] = [];
  for (const pid of readdirSync("/proc").filter((e) => /^\d+$/.test(e))) {
    let cmdline: string;
    try {
      cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ");
    } catch {
      continue; // gone meanwhile
    }
    if (folders.some((f) => cmdline.includes(f))) found.push(`${pid}: ${cmdline}`);
  }
  return found;
}

async function assertNothingLeft(folders: readonly string[]): Promise<void> {
  await eventually("no sandbox process left", () => {
    assert.deepEqual(processesUsing(folders), []);
  }, 5_000);
  for (const folder of folders) assert.equal(existsSync(folder), false, `${folder} removed`);
}

describe("the sandbox", () => {
  after(() => {
    for (const run of runs) run.child.kill("SIGKILL");
  });

  /** Runs the sandbox with --exit-after-scale-up to its end; resolves with its output once it has exited 0. */
  async function runToScaleUp(autoscaler: "real" | "stand-in"): Promise<string> {
    const started = performance.now();
    const run = startSandbox(autoscaler, ["--exit-after-scale-up"]);
    const { code } = await run.exited;
    console.log(`sandbox smoke run (${autoscaler}): ${((performance.now() - started) / 1000).toFixed(1)} s`);
    assert.equal(code, 0, run.output());
    assert.match(run.output(), /plugpool\s+switched on the plug of worker-1/);
    assert.match(run.output(), /scaled up: pod demo runs on worker-1/);
    await assertNothingLeft(foldersOf(run.output()));
    return run.output();
  }

  it("with the real cluster-autoscaler, scales up for its pending pod and, with --exit-after-scale-up, exits 0", { skip: autoscalerMissing() }, async () => {
    const output = await runToScaleUp("real");
    assert.match(output, /the real cluster-autoscaler drives plugpool/);
    assert.match(output, /cluster-autoscaler Scale-up: setting group workers size to 1/);
    assert.doesNotMatch(output, /stand-in/);
  });

  it("with the stand-in for cluster-autoscaler, says so, scales up and, with --exit-after-scale-up, exits 0", async () => {
    const output = await runToScaleUp("stand-in");
    assert.ok(output.includes(STAND_IN_NOTICE), output);
    assert.match(output, /ca stand-in\s+Pod default\/demo is unschedulable/);
    assert.match(output, /ca stand-in\s+Scale-up: setting group workers size to 1/);
  });

  it("with --backends, starts one machine per power backend and scales up the one on a Shelly device", { skip: autoscalerMissing() }, async () => {
    const started = performance.now();
    const run = startSandbox("real", ["--backends", "--exit-after-scale-up"]);
    const { code } = await run.exited;
    console.log(`sandbox --backends (real): ${((performance.now() - started) / 1000).toFixed(1)} s`);
    const output = run.output();
    assert.equal(code, 0, output);
    assert.match(output, /curl '.*\/rpc\/Switch\.GetStatus\?id=0'\s+# the Shelly device of worker-1/);
    assert.match(output, /\/api\/states\/switch\.worker_2\s+# worker-2's entity in Home Assistant/);
    assert.match(output, /\/redfish\/v1\/Systems\/worker-3\s+# worker-3's system on its BMC/);
    assert.match(output, /# the plug of worker-4 \(ESPHome 2026\.7\)/);
    assert.match(output, /plugpool\s+switched on the plug of worker-1/);
    assert.match(output, /scaled up: pod demo runs on worker-1/);
    await assertNothingLeft(foldersOf(output));
  });

  it("with --tour, walks through a scale-up past a machine that never boots and a scale-down to zero, then exits 0", async () => {
    const autoscaler = autoscalerMissing() === undefined ? "real" : "stand-in";
    const started = performance.now();
    const run = startSandbox(autoscaler, ["--tour"]);
    const { code } = await run.exited;
    console.log(`sandbox tour (${autoscaler}): ${((performance.now() - started) / 1000).toFixed(1)} s`);
    const output = run.output();
    assert.equal(code, 0, output);
    const at = (pattern: RegExp): number => {
      const found = pattern.exec(output);
      assert.ok(found !== null, `${String(pattern)} in:\n${output}`);
      return found.index;
    };
    const order = [
      /Step 1 of 3: scale-up from zero/,
      /plugpool\s+switched on the plug of worker-1/,
      /Step 2 of 3: a machine that never boots/,
      /plugpool\s+switched off the plug of worker-1 \(unregistered\)/,
      /plugpool\s+switched on the plug of worker-2/,
      /pod demo runs on worker-2; worker-1 is quarantined: true/,
      /Step 3 of 3: scale-down to zero/,
      /plugpool\s+switched off the plug of worker-2 \(power-off\)/,
      /plugpool\s+deleted node worker-2/,
      /Tour done in \d+ s: every plug is off and no Node is left/,
    ].map(at);
    assert.deepEqual(order, [...order].sort((a, b) => a - b), "the tour's steps in order");
    assert.match(output, /worker-3 never on/);
    await assertNothingLeft(foldersOf(output));
  });

  it("stops everything on SIGTERM, leaving no process and no file behind", async () => {
    const run = startSandbox("stand-in", []);
    await eventually("the scale-up", () => {
      assert.match(run.output(), /scaled up/);
    }, 120_000, 250);
    const folders = foldersOf(run.output());
    assert.notDeepEqual(processesUsing(folders), [], "the sandbox's processes run");
    run.child.kill("SIGTERM");
    const { signal } = await run.exited;
    assert.equal(signal, "SIGTERM");
    assert.match(run.output(), /sandbox: SIGTERM, stopping everything/);
    await assertNothingLeft(folders);
  });
});
