// `npm run bench`: plugpool's footprint and speed as users run it — compiled (`npm run build`), at
// cluster-autoscaler's cadence (one full CA loop every 10 s), inside a cgroup limited to the example
// Deployment's memory limit and once without — against a real kube-apiserver and emulated plugs on loopback.
// Prints tables and the goals, and writes .bench/results.json.
//
//   node bench/run.ts [--sizes 500] [--loops 24] [--quick] [--limit 512Mi|none] [--commit REV] [--before REV] [--cpu-prof] [--foreign-nodes 5000] [--node-arg=--max-old-space-size=64 …]
//
// plugpool runs with the variables the Containerfile's runtime stage sets (NODE_OPTIONS: heap flags), as in the image.
// --limit: the cgroup's memory limit (default: the plugpool container's limits.memory in
// deploy/examples/deployment.yaml; "none" measures without a limit only). --quick takes fewer loops and
// samples (a smoke run). --commit builds and measures a committed revision (with its Containerfile and
// example Deployment) instead of the working tree. --before also builds REV and measures it in the same run,
// taking turns with the other in each memory condition, beside the same floors: a before/after table.
// --cpu-prof runs plugpool with `node --cpu-prof` and prints where the profiles are.
// --foreign-nodes adds that many Nodes of a kubelet's size (about 10 KB each) that match no machine: the heap
// plugpool needs for a large cluster, under the image's heap cap.
// --node-arg passes an option to plugpool's Node.js process. Needs the control-plane binaries
// (tests/harness/control-plane/build.sh) and about 10 minutes per size with the defaults.
import { mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { execFileSync } from "node:child_process";
import { join, relative } from "node:path";
import { parseArgs } from "node:util";
import { parseAllDocuments } from "yaml";
import { startCluster } from "../tests/harness/site/index.ts";
import { createMemoryCgroup, type MemoryCgroup } from "./cgroup.ts";
import { containerfileEnv, containerfileNodeArgs } from "./image-env.ts";
import { apiserverCa, plugpoolKubeconfig } from "./cluster-fixture.ts";
import { startCountingProxy } from "./counting-proxy.ts";
import { PLUG_TIMEOUT, SLOW_PLUG_MS } from "./layout.ts";
import { describeMachine, load, machineInfo } from "./machine-info.ts";
import { formatGoals, formatResults, goals } from "./report.ts";
import { runSize, type BenchSettings, type Build, type Condition, type SizeResult } from "./scenario.ts";

const root = join(import.meta.dirname, "..");
const { values } = parseArgs({
  options: {
    sizes: { type: "string", default: "500" },
    loops: { type: "string", default: "24" },
    quick: { type: "boolean", default: false },
    limit: { type: "string" },
    commit: { type: "string" },
    before: { type: "string" },
    "cpu-prof": { type: "boolean", default: false },
    "foreign-nodes": { type: "string", default: "0" },
    "node-arg": { type: "string", multiple: true, default: [] },
  },
});
const sizes = values.sizes.split(",").map((s) => Number(s.trim()));
if (sizes.some((n) => !Number.isInteger(n) || n < 2)) throw new Error(`--sizes: whole numbers of at least 2 expected, got ${values.sizes}`);

/** A file of the working tree, or of `commit`. */
function fileAt(commit: string | undefined, path: string): string {
  return commit === undefined ? readFileSync(join(root, path), "utf8") : execFileSync("git", ["show", `${commit}:${path}`], { cwd: root, encoding: "utf8" });
}

/** limits.memory of the plugpool container in the example Deployment. */
function exampleLimit(commit: string | undefined): string {
  const text = fileAt(commit, "deploy/examples/deployment.yaml");
  for (const doc of parseAllDocuments(text)) {
    const d = doc.toJS() as { kind?: string; spec?: { template?: { spec?: { containers?: { name: string; resources?: { limits?: { memory?: string } } }[] } } } };
    const limit = d.kind === "Deployment" ? d.spec?.template?.spec?.containers?.find((c) => c.name === "plugpool")?.resources?.limits?.memory : undefined;
    if (limit !== undefined) return limit;
  }
  throw new Error("deploy/examples/deployment.yaml: no limits.memory on the plugpool container");
}

/** Bytes of a memory quantity as the Deployment writes it (Ki, Mi, Gi, or plain bytes). */
function bytesOf(quantity: string): number {
  const match = /^(\d+)(Ki|Mi|Gi)?$/.exec(quantity);
  if (match?.[1] === undefined) throw new Error(`--limit: a memory quantity like 512Mi expected, got ${quantity}`);
  return Number(match[1]) * 1024 ** ["", "Ki", "Mi", "Gi"].indexOf(match[2] ?? "");
}

const outDir = join(root, ".bench");
const workDir = join(outDir, "work");
mkdirSync(workDir, { recursive: true });

/**
 * What users run: the module the container image runs (`npm run bundle`) of the working tree, made aside so that a
 * rebuild of dist/ during the run changes nothing; or what a revision's image ran (its bundle, or before bundles
 * existed its `tsc` build), for before/after tables. Each build has its own directory.
 */
function build(commit: string | undefined): string {
  const name = commit ?? "tree";
  const buildDir = join(outDir, `dist-${name}`);
  rmSync(buildDir, { recursive: true, force: true });
  const bundle = join(buildDir, "plugpool.mjs");
  if (commit === undefined) {
    execFileSync(process.execPath, [join(root, "scripts", "bundle.ts"), bundle], { cwd: root, stdio: ["ignore", "inherit", "inherit"] });
    return bundle;
  }
  const tree = join(outDir, `tree-${name}`);
  rmSync(tree, { recursive: true, force: true });
  mkdirSync(tree, { recursive: true });
  const bundled = execFileSync("git", ["ls-tree", "--name-only", commit, "scripts/bundle.ts"], { cwd: root, encoding: "utf8" }).trim() !== "";
  // The whole scripts/ directory: the bundle script imports others of it (its esbuild plugins).
  const files = ["src", "gen", "package.json", "tsconfig.json", "tsconfig.build.json", ...(bundled ? ["scripts"] : [])];
  execFileSync("sh", ["-c", `git archive "$0" ${files.join(" ")} | tar -x -C "$1"`, commit, tree], { cwd: root, stdio: ["ignore", "inherit", "inherit"] });
  // The build resolves its packages from the repository's node_modules, beside .bench/.
  symlinkSync(join(root, "node_modules"), join(tree, "node_modules"));
  if (bundled) {
    execFileSync(process.execPath, [join(tree, "scripts", "bundle.ts"), bundle], { cwd: tree, stdio: ["ignore", "inherit", "inherit"] });
    return bundle;
  }
  execFileSync(process.execPath, [join(root, "node_modules", "typescript", "bin", "tsc"), "-p", "tsconfig.build.json", "--outDir", buildDir], { cwd: tree, stdio: ["ignore", "inherit", "inherit"] });
  return join(buildDir, "src", "app", "main.js");
}
/** A build of `commit` (the working tree when undefined), run as that revision's image runs node. */
function buildOf(commit: string | undefined, label: string): Build & { readonly label: string } {
  const containerfile = fileAt(commit, "Containerfile");
  const image = { env: containerfileEnv(containerfile), nodeArgs: containerfileNodeArgs(containerfile) };
  return { name: commit ?? "tree", label, entry: build(commit), image };
}
const builds = [
  ...(values.before === undefined ? [] : [buildOf(values.before, `before (${values.before})`)]),
  buildOf(values.commit, values.before === undefined ? "" : `after (${values.commit ?? "the working tree"})`),
];

const loops = values.quick ? 6 : Number(values.loops);
const foreignNodes = Number(values["foreign-nodes"]);
if (!Number.isInteger(foreignNodes) || foreignNodes < 0) throw new Error(`--foreign-nodes: a whole number expected, got ${values["foreign-nodes"]}`);
const settings: BenchSettings = {
  loops,
  warmupLoops: 2,
  cadenceMs: 10_000,
  rpcSamples: values.quick ? 200 : 1000,
  rpcWarmup: values.quick ? 50 : 100,
  workDir,
  cpuProfile: values["cpu-prof"],
  nodeArgs: values["node-arg"],
  foreignNodes,
};
if (!Number.isInteger(loops) || loops <= settings.warmupLoops + 1) throw new Error(`--loops: more than ${settings.warmupLoops + 1} expected`);

const started = performance.now();
const say = (text: string): void => {
  process.stderr.write(`[${((performance.now() - started) / 1000).toFixed(0).padStart(4)} s] ${text}\n`);
};

const machine = machineInfo();
console.log(describeMachine(machine));
for (const b of builds) {
  const which = b.name === "tree" ? "the working tree" : `commit ${b.name}`;
  console.log(`plugpool${b.label === "" ? "" : ` ${b.label}`}: ${which}, compiled; runs as: ${Object.entries(b.image.env).map(([k, v]) => `${k}="${v}"`).join(" ")} (the Containerfile's ENV) node ${[...b.image.nodeArgs, ...settings.nodeArgs, relative(process.cwd(), b.entry)].join(" ")} serve (the ENTRYPOINT's options, then --node-arg)`);
}
console.log(`plugs: one emulated device per machine, timeout ${PLUG_TIMEOUT}; one in ten faulty (dead: never answers; slow: ${SLOW_PLUG_MS} ms)`);
if (foreignNodes > 0) console.log(`cluster: besides the machines' Nodes, ${foreignNodes} Nodes of a kubelet's size that match no machine`);
console.log(`cadence: one CA loop every ${settings.cadenceMs / 1000} s, ${settings.loops} loops (${settings.warmupLoops} not counted)`);

const limitText = values.limit ?? exampleLimit(values.commit);
let cgroup: MemoryCgroup | undefined;
if (limitText !== "none") {
  try {
    cgroup = createMemoryCgroup(`plugpool-bench-${process.pid}`, bytesOf(limitText));
  } catch (error) {
    console.log(`memory limit ${limitText}: ${(error as Error).message}; measuring without it`);
  }
}
const places = [...(cgroup === undefined ? [] : [{ label: `limit ${limitText}`, cgroup }]), { label: "no limit" }];
const conditions: Condition[] = places.flatMap((place) => builds.map((b) => ({
  ...place,
  label: b.label === "" ? place.label : `${b.label}, ${place.label}`,
  build: b,
})));
console.log("");

say("starting the control plane");
// No controllers: nothing marks the Nodes the bench registers NotReady.
const { plane } = await startCluster({ controllers: false, setup: "bare" });
const results: SizeResult[] = [];
try {
  const proxy = await startCountingProxy(plane.server, apiserverCa(plane));
  try {
    const kubeconfigPath = await plugpoolKubeconfig(plane, proxy.url);
    for (const count of sizes) {
      say(`${count} machines`);
      results.push(await runSize(plane, proxy, kubeconfigPath, count, conditions, settings, say));
    }
  } finally {
    await proxy.close();
  }
} finally {
  await plane.stop();
  cgroup?.remove();
}

const goalList = goals(results);
const end = load();
const file = join(outDir, "results.json");
writeFileSync(file, `${JSON.stringify({ machine, loadAverageAtEnd: end, settings, sizes: results, goals: goalList }, null, 2)}\n`);
console.log(formatResults(results));
console.log("");
console.log(formatGoals(goalList));
console.log(`\nload average at end: ${end.join(" ")}; total ${((performance.now() - started) / 1000).toFixed(0)} s`);
console.log(`results: ${file}`);
