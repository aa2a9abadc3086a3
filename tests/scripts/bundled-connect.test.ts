// Connect's server pipeline as dist/plugpool.mjs ships it (its async generators made native, its per-call generator
// functions moved to module level) must answer every call exactly as Connect as published does: each call below
// runs through both builds of connect-calls.ts, and the answers (status, headers, body, trailers, what an
// interceptor saw) must be equal.
import assert from "node:assert/strict";
import { join } from "node:path";
import { describe, it } from "node:test";
import { build, type Plugin } from "esbuild";
import { nativeAsyncGeneratorsPlugin } from "../../scripts/native-async-generators.ts";
import type * as Calls from "./connect-calls.ts";

async function bundled(plugins: Plugin[]): Promise<{ module: typeof Calls; code: string }> {
  const { outputFiles } = await build({
    entryPoints: [join(import.meta.dirname, "connect-calls.ts")],
    bundle: true,
    platform: "node",
    format: "esm",
    write: false,
    logLevel: "warning",
    plugins,
  });
  const [file] = outputFiles;
  if (file === undefined) throw new Error("esbuild wrote nothing for connect-calls.ts");
  return { module: (await import(`data:text/javascript,${encodeURIComponent(file.text)}`)) as typeof Calls, code: file.text };
}

describe("Connect's server pipeline as bundled answers as published", async () => {
  const published = await bundled([]);
  const shipped = await bundled([nativeAsyncGeneratorsPlugin]);
  const { frame, request } = published.module;

  it("is the rewritten pipeline: no lowered generators, no generator function made per call", () => {
    assert.match(published.code, /__asyncGenerator\(this, arguments/);
    assert.doesNotMatch(shipped.code, /__asyncGenerator\(this, arguments/);
    assert.doesNotMatch(shipped.code, /return\s+async\s+function\s*\*/);
  });

  const calls: Record<string, Calls.Call> = {
    "an answer": { chunks: [frame(request("group-1"))] },
    "a request split across chunks": { chunks: [frame(request("group-1")).subarray(0, 3), frame(request("group-1")).subarray(3)] },
    "a ConnectError from the handler": { chunks: [frame(request("missing"))] },
    "a plain error from the handler": { chunks: [frame(request("crash"))] },
    "a deadline that passes while the handler waits": { chunks: [frame(request("hang"))], header: { "grpc-timeout": "20m" } },
    "an invalid grpc-timeout": { chunks: [frame(request("group-1"))], header: { "grpc-timeout": "soon" } },
    "no request message": { chunks: [] },
    "two request messages for a unary method": { chunks: [frame(request("a")), frame(request("b"))] },
    "a truncated frame": { chunks: [frame(request("group-1")).subarray(0, 6)] },
    "a compressed frame in an encoding not offered": { chunks: [frame(request("group-1"), 1)], header: { "grpc-encoding": "br" } },
    "a message that does not parse": { chunks: [frame(new Uint8Array([0x0a, 0x09, 0x61]))] },
  };

  for (const [name, input] of Object.entries(calls)) {
    it(`answers the same: ${name}`, async () => {
      const expected = await published.module.call(input);
      assert.deepEqual(await shipped.module.call(input), expected);
    });
  }

  it("answers calls, errors and deadlines with the status a gRPC client expects", async () => {
    const trailer = async (name: string): Promise<string | undefined> => {
      const input = calls[name];
      if (input === undefined) throw new Error(name);
      return new Map((await shipped.module.call(input)).trailer).get("grpc-status");
    };
    assert.equal(await trailer("an answer"), "0");
    assert.equal(await trailer("a ConnectError from the handler"), "5");
    assert.equal(await trailer("a plain error from the handler"), "13");
    assert.equal(await trailer("a deadline that passes while the handler waits"), "4");
    assert.equal(await trailer("two request messages for a unary method"), "12");
  });
});
