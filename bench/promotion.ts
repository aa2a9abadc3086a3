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
// promoted. No I/O: the Connect case calls the router's gRPC handler directly with a recorded request.
//
//   node bench/promotion.ts
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import { createConnectRouter } from "@connectrpc/connect";
import type { UniversalServerRequest } from "@connectrpc/connect/protocol";
import { CloudProvider } from "../gen/clusterautoscaler/cloudprovider/v1/externalgrpc/externalgrpc_pb.ts";
import { containerfileEnv, containerfileNodeArgs, type ImageRuntime } from "./image-env.ts";

const MEASURE = "promotion-bench: measuring";
const STAGES = 8;

/** One gRPC NodeGroupTargetSize call through Connect's router, as its Node.js adapter makes it. */
function connectUnary(): () => Promise<number> {
  const router = createConnectRouter({ grpc: true, grpcWeb: false, connect: false });
  const targetSize = create(CloudProvider.method.nodeGroupTargetSize.output, { targetSize: 3 });
  router.service(CloudProvider, { nodeGroupTargetSize: () => targetSize });
  const path = `/${CloudProvider.typeName}/${CloudProvider.method.nodeGroupTargetSize.name}`;
  const handler = router.handlers.find((h) => h.requestPath === path);
  if (handler === undefined) throw new Error(`no handler for ${path}`);
  // A gRPC frame: no compression, 4 bytes, NodeGroupTargetSizeRequest{id: "g1"}.
  const frame = new Uint8Array([0, 0, 0, 0, 4, 0x0a, 0x02, 0x67, 0x31]);
  return async () => {
    const request: UniversalServerRequest = {
      httpVersion: "2.0",
      method: "POST",
      url: `http://127.0.0.1${path}`,
      header: new Headers({ "content-type": "application/grpc", te: "trailers" }),
      body: single(frame),
      signal: new AbortController().signal,
      contextValues: undefined,
    };
    const response = await handler(request);
    return drain(response.body);
  };
}

/** One chunk as an async iterable, made without a generator so that only the stages measured make any. */
function single(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  let given = false;
  const next = (): Promise<IteratorResult<Uint8Array, undefined>> => {
    const result: IteratorResult<Uint8Array, undefined> = given ? { done: true, value: undefined } : { done: false, value: bytes };
    given = true;
    return Promise.resolve(result);
  };
  return { [Symbol.asyncIterator]: () => ({ next }) };
}

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

async function drain(body: AsyncIterable<Uint8Array> | undefined): Promise<number> {
  let bytes = 0;
  if (body !== undefined) for await (const chunk of body) bytes += chunk.length;
  return bytes;
}

const frame = new Uint8Array(64);
const cases = {
  "Connect gRPC unary call": { iterations: 5_000, run: connectUnary() },
  [`${STAGES} async generator stages, functions made per call`]: {
    iterations: 20_000,
    run: () => {
      let it: AsyncIterable<Uint8Array> = single(frame);
      for (let i = 0; i < STAGES; i++) it = passStage(it);
      return drain(it);
    },
  },
  [`${STAGES} async generator stages, module-level function`]: {
    iterations: 20_000,
    run: () => {
      let it: AsyncIterable<Uint8Array> = single(frame);
      for (let i = 0; i < STAGES; i++) it = pass(it);
      return drain(it);
    },
  },
} satisfies Record<string, { iterations: number; run: () => Promise<number> }>;
type CaseName = keyof typeof cases;

async function runCase(name: CaseName): Promise<void> {
  const { iterations, run } = cases[name];
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
  console.log("case                                                  iterations  scavenges  promoted KB/iteration  mark-compacts");
  for (const name of Object.keys(cases) as CaseName[]) {
    const { iterations } = cases[name];
    const m = measure(name, image);
    console.log(
      `${name.padEnd(54)}${String(iterations).padStart(10)}${String(m.scavenges).padStart(11)}` +
        `${(m.promotedBytes / 1024 / iterations).toFixed(2).padStart(23)}${String(m.markCompacts).padStart(15)}`,
    );
  }
}
