// `npm run bench`: plugpool's speed, scale and footprint at 10, 100 and 500 machines, against a real
// kube-apiserver and emulated plugs on loopback. Prints tables and writes .bench/results.json.
//
//   node bench/run.ts [--sizes 10,100,500] [--quick] [--compiled] [--cpu-prof] [--node-arg=--max-old-space-size=64 …]
//
// plugpool runs from src/ (Node's type stripping) unless --compiled: then from a tsc build in .bench/build,
// as the container image runs it (type stripping costs some memory and start-up time).
// --quick takes fewer samples (a smoke run); --cpu-prof runs plugpool with --cpu-prof and prints where its
// CPU time went; --node-arg passes an option to plugpool's Node.js process (to try a fix without a build).
// Needs the control-plane binaries (tests/support/control-plane/build.sh) and about 4 minutes.
import { mkdirSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { parseArgs } from "node:util";
import { startControlPlane } from "../tests/support/control-plane.ts";
import { apiserverCa, createNamespace, plugpoolKubeconfig } from "./cluster-fixture.ts";
import { startCountingProxy } from "./counting-proxy.ts";
import { PLUG_TIMEOUT, SLOW_PLUG_MS } from "./layout.ts";
import { buildPlugpool } from "./build.ts";
import { describeMachine, load, machineInfo } from "./machine-info.ts";
import { summariseProfiles } from "./cpu-profile.ts";
import { formatGoals, formatResults, goals } from "./report.ts";
import { runSize, type BenchSettings, type SizeResult } from "./scenario.ts";

const { values } = parseArgs({
  options: {
    sizes: { type: "string", default: "10,100,500" },
    quick: { type: "boolean", default: false },
    "cpu-prof": { type: "boolean", default: false },
    "node-arg": { type: "string", multiple: true, default: [] },
    compiled: { type: "boolean", default: false },
  },
});
const sizes = values.sizes.split(",").map((s) => Number(s.trim()));
if (sizes.some((n) => !Number.isInteger(n) || n < 2)) throw new Error(`--sizes: whole numbers of at least 2 expected, got ${values.sizes}`);

const outDir = join(import.meta.dirname, "..", ".bench");
const workDir = join(outDir, "work");
mkdirSync(workDir, { recursive: true });
const samples = values.quick
  ? { refreshSamples: 5, caLoops: 2, rpcSamples: 200, rpcWarmup: 50, throughputMs: 500 }
  : { refreshSamples: 20, caLoops: 5, rpcSamples: 1000, rpcWarmup: 100, throughputMs: 2000 };
const entry = values.compiled ? buildPlugpool(join(outDir, "build")) : join(import.meta.dirname, "..", "src", "app", "main.ts");
const settings: BenchSettings = { ...samples, callers: 16, workDir, entry, cpuProfile: values["cpu-prof"], nodeArgs: values["node-arg"] };

const started = performance.now();
const say = (text: string): void => {
  process.stderr.write(`[${((performance.now() - started) / 1000).toFixed(0).padStart(4)} s] ${text}\n`);
};

const machine = machineInfo();
console.log(describeMachine(machine));
console.log(`plugpool runs as: node ${[...settings.nodeArgs, relative(process.cwd(), entry)].join(" ")} serve`);
console.log(`plugs: one emulated device per machine, timeout ${PLUG_TIMEOUT}; one in ten faulty (dead: never answers; slow: ${SLOW_PLUG_MS} ms)\n`);

say("starting the control plane");
const plane = await startControlPlane();
const results: SizeResult[] = [];
try {
  await createNamespace(plane);
  const proxy = await startCountingProxy(plane.server, apiserverCa(plane));
  try {
    const kubeconfigPath = await plugpoolKubeconfig(plane, proxy.url);
    for (const count of sizes) {
      say(`${count} machines`);
      results.push(await runSize(plane, proxy, kubeconfigPath, count, settings, say));
    }
  } finally {
    await proxy.close();
  }
} finally {
  await plane.stop();
}

const goalList = goals(results);
console.log(formatResults(results));
console.log("");
console.log(formatGoals(goalList));
if (settings.cpuProfile) console.log(`\n${summariseProfiles(results)}`);
const end = load();
console.log(`\nload average at end: ${end.join(" ")}; total ${((performance.now() - started) / 1000).toFixed(0)} s`);

const file = join(outDir, "results.json");
writeFileSync(file, `${JSON.stringify({ machine, loadAverageAtEnd: end, settings, sizes: results, goals: goalList }, null, 2)}\n`);
console.log(`results: ${file}`);
