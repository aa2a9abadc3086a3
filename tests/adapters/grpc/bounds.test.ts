// Limits of the gRPC server against oversized or odd requests, with independent clients: @grpc/grpc-js, and
// raw HTTP/2 where a test needs to see exactly what the server sends.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { fork, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import http2 from "node:http2";
import * as grpc from "@grpc/grpc-js";
import { cloudProviderRoutes, errorMapping } from "../../../src/adapters/grpc/routes.ts";
import { MAX_MESSAGE_CHARS } from "../../../src/adapters/grpc/errors.ts";
import { startGrpcServer, type GrpcServer } from "../../../src/adapters/grpc/server.ts";
import { createCloudProviderClient, type CloudProviderClient } from "../../harness/grpc-client.ts";
import { stubPool } from "./stub-pool.ts";

const SERVICE = "/clusterautoscaler.cloudprovider.v1.externalgrpc.CloudProvider";

/**
 * A status message as sent. grpc-js decodes grpc-message with decodeURI, which leaves the escapes of
 * reserved characters (",", "/") that Connect writes in place; grpc-go decodes them all.
 */
const sent = (error: grpc.ServiceError): string => decodeURIComponent(error.details);

interface RawAnswer {
  readonly headers: http2.IncomingHttpHeaders;
  readonly trailers: http2.IncomingHttpHeaders;
  /** grpc-status from the trailers, or from the headers of a trailers-only answer. */
  readonly status: string | undefined;
}

/** One gRPC call over plain HTTP/2 with no timer of its own: the answer is whatever the server sends. */
async function rawCall(port: number, path: string, headers: http2.OutgoingHttpHeaders = {}): Promise<RawAnswer> {
  const session = http2.connect(`http://127.0.0.1:${port}`);
  try {
    const stream = session.request({ ":method": "POST", ":path": path, "content-type": "application/grpc", te: "trailers", ...headers });
    // An empty message: five bytes of envelope (no compression, length 0).
    stream.end(Buffer.alloc(5));
    const [answer] = (await once(stream, "response")) as [http2.IncomingHttpHeaders];
    let trailers: http2.IncomingHttpHeaders = {};
    stream.on("trailers", (t: http2.IncomingHttpHeaders) => {
      trailers = t;
    });
    stream.resume();
    await once(stream, "close");
    const status = trailers["grpc-status"] ?? answer["grpc-status"];
    return { headers: answer, trailers, status: Array.isArray(status) ? status[0] : status };
  } finally {
    session.close();
  }
}

describe("gRPC request bounds", () => {
  let server: GrpcServer;
  let client: CloudProviderClient;

  before(async () => {
    server = await startGrpcServer({
      host: "127.0.0.1",
      port: 0,
      routes: cloudProviderRoutes({ pool: stubPool(), clock: { now: () => Date.now() }, cleanup: () => Promise.resolve() }),
      interceptors: [errorMapping],
    });
    client = createCloudProviderClient(`127.0.0.1:${server.port}`);
  });
  after(async () => {
    client.close();
    await server.close(100);
  });

  it("answers DeleteNodes of 20 000 unknown nodes NotFound, with the message cut to a bounded length", async () => {
    const nodes = Array.from({ length: 20_000 }, (_, i) => ({ name: `unknown-${i}`, providerID: `k3s://unknown-${i}` }));
    const { error } = await client.call("nodeGroupDeleteNodes", { id: "workers", nodes }, { deadlineMs: 20_000 });
    assert.equal(error?.code, grpc.status.NOT_FOUND, error?.details);
    const message = sent(error);
    assert.ok(message.length <= MAX_MESSAGE_CHARS, `message of ${message.length} characters`);
    assert.match(message, /^deleting unknown-0, unknown-1, /);
    assert.match(message, /… \(\d+ more characters\)$/);
  });

  it("answers an unknown method or service Unimplemented as a gRPC status, not as an HTTP error", async () => {
    const raw = new grpc.Client(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure());
    try {
      for (const path of [`${SERVICE}/NodeGroupFrobnicate`, "/grpc.health.v1.Health/Check"]) {
        const error = await new Promise<grpc.ServiceError | null>((resolve) => {
          raw.makeUnaryRequest(path, (b: Buffer) => b, (b: Buffer) => b, Buffer.alloc(0), (e) => {
            resolve(e);
          });
        });
        assert.equal(error?.code, grpc.status.UNIMPLEMENTED, path);
        assert.equal(sent(error), `unknown method ${path}`);
        const answer = await rawCall(server.port, path);
        assert.deepEqual([answer.headers[":status"], answer.headers["content-type"], answer.status], [200, "application/grpc", "12"]);
      }
    } finally {
      raw.close();
    }
  });

  it("answers DeadlineExceeded from the server when the call's deadline passes during a slow call", async () => {
    // grpc-js ends the call at its own deadline too, so the server's own answer is read over raw HTTP/2.
    const answer = await rawCall(server.port, `${SERVICE}/Refresh`, { "grpc-timeout": "200m" });
    assert.equal(answer.status, String(grpc.status.DEADLINE_EXCEEDED), JSON.stringify(answer.trailers));
    const { error } = await client.call("refresh", {}, { deadlineMs: 200 });
    assert.equal(error?.code, grpc.status.DEADLINE_EXCEEDED);
    assert.equal((await client.call("nodeGroups", {})).error, undefined);
  });
});

describe("a 64 MB request", () => {
  let child: ChildProcess;
  let port: number;

  /** The next message from the server process. */
  const reply = async <T>(): Promise<T> => ((await once(child, "message")) as [T])[0];

  before(async () => {
    child = fork(new URL("./bounds-server.ts", import.meta.url), { stdio: ["ignore", "inherit", "inherit", "ipc"] });
    ({ port } = await reply<{ port: number }>());
  });
  after(async () => {
    child.send("stop");
    await once(child, "exit");
  });

  it("is refused ResourceExhausted without the server buffering it", async () => {
    child.send("rss");
    const start = await reply<{ rss: number; maxRss: number }>();
    const name = "x".repeat(64 * 1024 * 1024);
    const client = createCloudProviderClient(`127.0.0.1:${port}`);
    const { error } = await client.call("nodeGroupForNode", { node: { name, providerID: "" } }, { deadlineMs: 30_000 });
    client.close();
    assert.equal(error?.code, grpc.status.RESOURCE_EXHAUSTED, error?.details);
    assert.match(error.details, /larger than configured readMaxBytes 4194304/);
    child.send("rss");
    const end = await reply<{ rss: number; maxRss: number }>();
    const mb = (bytes: number) => (bytes / 1024 / 1024).toFixed(1);
    const peakGrowth = end.maxRss - Math.max(start.maxRss, start.rss);
    console.log(`server RSS ${mb(start.rss)} MB → ${mb(end.rss)} MB (peak ${mb(end.maxRss)} MB, peak growth ${mb(Math.max(0, peakGrowth))} MB)`);
    assert.ok(end.maxRss - start.rss < 32 * 1024 * 1024, "the server's peak RSS grew by less than 32 MB");
  });
});
