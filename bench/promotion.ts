// `npm run bench:promotion`: how much of a gRPC call's garbage survives young-generation collections and is
// moved to the old generation, where only a full (mark-compact) collection frees it, and why.
//
// V8 gives every generator-function closure (`function*`, `async function*`) its own initial map when the
// first generator object is made from it, and maps live in the old generation. That map points back to the
// closure, so a generator function created per call keeps the closure, its scope and everything they reach
// alive through every young-generation collection until the next full one. Connect's server pipeline makes
// ten or more such closures per call: each `transform…()` returns a new `async function*`, and its published
// ES2017 build turns every async generator into a helper call with a new inner `function*`
// (https://github.com/connectrpc/connect-es/blob/main/packages/connect/src/protocol/async-iterable.ts).
//
// Each case runs in a process of its own as the image runs node (the Containerfile's ENV and ENTRYPOINT options)
// with V8's --trace-gc-nvp, and reports, over its measured iterations, how many scavenges ran and the bytes they
// promoted. No I/O: the Connect cases call the router's gRPC handler directly with a recorded request, once with
// Connect loaded as modules and once bundled as dist/plugpool.mjs is (as published, in one module).
//
//   node bench/promotion.ts
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { build } from "esbuild";
import { connectUnary, drain, single } from "./connect-unary.ts";
import { containerfileEnv, containerfileNodeArgs, type ImageRuntime } from "./image-env.ts";

const MEASURE = "promotion-bench: measuring";
const STAGES = 8;

async function* pass(source: AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array> {
  for await (const chunk of source) yield chunk;
}

/**
 * A stage as Connect's published build runs its transforms: a generator function made for every call, closing
 * over the stage's source (the previous stage, and through it the whole pipeline).
 */
function passStage(source: AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array> {
  const stage = async function* (): AsyncGenerator<Uint8Array> {
    for await (const chunk of source) yield chunk;
  };
  return stage();
}

/** connect-unary.ts bundled as dist/plugpool.mjs is: one module, its dependencies as published. */
async function bundledConnectUnary(): Promise<() => Promise<number>> {
  const { outputFiles } = await build({
    entryPoints: [join(import.meta.dirname, "connect-unary.ts")],
    bundle: true,
    platform: "node",
    format: "esm",
    write: false,
    logLevel: "warning",
  });
  const [file] = outputFiles;
  if (file === undefined) throw new Error("esbuild wrote nothing for connect-unary.ts");
  const bundled = (await import(`data:text/javascript,${encodeURIComponent(file.text)}`)) as typeof import("./connect-unary.ts");
  return bundled.connectUnary();
}

const frame = new Uint8Array(64);
const cases = {
  "Connect gRPC unary call, published build": { iterations: 5_000, make: () => Promise.resolve(connectUnary()) },
  "Connect gRPC unary call, as bundled": { iterations: 5_000, make: bundledConnectUnary },
  [`${STAGES} async generator stages, functions made per call`]: {
    iterations: 20_000,
    make: () => Promise.resolve(() => {
      let it: AsyncIterable<Uint8Array> = single(frame);
      for (let i = 0; i < STAGES; i++) it = passStage(it);
      return drain(it);
    }),
  },
  [`${STAGES} async generator stages, module-level function`]: {
    iterations: 20_000,
    make: () => Promise.resolve(() => {
      let it: AsyncIterable<Uint8Array> = single(frame);
      for (let i = 0; i < STAGES; i++) it = pass(it);
      return drain(it);
    }),
  },
} satisfies Record<string, { iterations: number; make: () => Promise<() => Promise<number>> }>;
type CaseName = keyof typeof cases;

async function runCase(name: CaseName): Promise<void> {
  const { iterations, make } = cases[name];
  const run = await make();
  for (let i = 0; i < 500; i++) await run();
  console.log(MEASURE);
  for (let i = 0; i < iterations; i++) await run();
}

interface Measured { scavenges: number; promotedBytes: number; markCompacts: number }

function measure(name: CaseName, image: ImageRuntime): Measured {
  const child = spawnSync(process.execPath, [...image.nodeArgs, "--trace-gc-nvp", import.meta.filename, name], {
    env: { ...process.env, ...image.env },
    encoding: "utf8",
    maxBuffer: 64 * 1024 * 1024,
  });
  if (child.status !== 0) throw new Error(`case "${name}" exited with ${child.status}: ${child.stderr}`);
  const lines = child.stdout.split("\n");
  // Only what follows the marker: the warm-up's collections are not the case's.
  const start = lines.indexOf(MEASURE);
  if (start < 0) throw new Error(`case "${name}" printed no "${MEASURE}" line`);
  const measured: Measured = { scavenges: 0, promotedBytes: 0, markCompacts: 0 };
  for (const line of lines.slice(start + 1)) {
    const kind = /\bgc=(\w+)/.exec(line)?.[1];
    if (kind === "s") {
      measured.scavenges++;
      measured.promotedBytes += Number(/\bpromoted=(\d+)/.exec(line)?.[1] ?? 0);
    } else if (kind === "mc") measured.markCompacts++;
  }
  return measured;
}

const caseName = process.argv[2];
if (caseName !== undefined) {
  if (!(caseName in cases)) throw new Error(`unknown case "${caseName}"; known: ${Object.keys(cases).join(", ")}`);
  await runCase(caseName as CaseName);
} else {
  const root = join(import.meta.dirname, "..");
  const containerfile = readFileSync(join(root, "Containerfile"), "utf8");
  const image: ImageRuntime = { env: containerfileEnv(containerfile), nodeArgs: containerfileNodeArgs(containerfile) };
  console.log(`as the image runs node: NODE_OPTIONS="${image.env.NODE_OPTIONS ?? ""}" node${image.nodeArgs.map((arg) => ` ${arg}`).join("")}; Node.js ${process.version}`);
  console.log(`${"case".padEnd(64)}iterations  scavenges  promoted KB/iteration  mark-compacts`);
  for (const name of Object.keys(cases) as CaseName[]) {
    const { iterations } = cases[name];
    const m = measure(name, image);
    console.log(
      `${name.padEnd(64)}${String(iterations).padStart(10)}${String(m.scavenges).padStart(11)}` +
        `${(m.promotedBytes / 1024 / iterations).toFixed(2).padStart(23)}${String(m.markCompacts).padStart(15)}`,
    );
  }
}
