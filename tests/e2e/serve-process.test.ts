// `plugpool serve` as a process, as the container runs it: config file, kubeconfig, credentials from the
// environment, mTLS, JSON logs on stdout, and a clean stop on SIGTERM.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { credentials } from "@grpc/grpc-js";
import type { ControlPlane } from "../harness/control-plane/index.ts";
import { startPlugEmulator, type EmulatedPlug } from "../harness/plug-emulator/index.ts";
import { createCloudProviderClient } from "../harness/grpc-client.ts";
import { createPki, type Pki } from "../harness/test-pki.ts";
import { eventually } from "../harness/eventually.ts";
import { plugpoolConfig, startCluster } from "../harness/site/index.ts";

const main = new URL("../../src/app/main.ts", import.meta.url).pathname;
const PASSWORD = "Zq-9-unlikely-pw";

describe("plugpool serve (as a process)", () => {
  let plane: ControlPlane;
  let plug: EmulatedPlug;
  let pki: Pki;
  let child: ChildProcess;
  const lines: Record<string, unknown>[] = [];
  let raw = "";

  before(async () => {
    ({ plane } = await startCluster({ controllers: false, setup: "bare" }));
    plug = await startPlugEmulator({ version: "2026.7", platform: "esp8266", auth: { type: "basic", username: "admin", password: PASSWORD } });
    pki = createPki();
    const config = join(pki.dir, "config.yaml");
    writeFileSync(config, plugpoolConfig({
      groups: [{ id: "workers", nodes: [{ name: "worker-1", plug: { url: plug.url, switch: "Relay" } }] }],
      sections: { tls: { cert: pki.serverCert, key: pki.serverKey, cacert: pki.ca } },
    }));
    child = spawn(process.execPath, [main, "serve", "--config", config, "--kubeconfig", plane.kubeconfigPath], {
      env: { PATH: process.env.PATH ?? "", PLUGPOOL_PLUG_USERNAME: "admin", PLUGPOOL_PLUG_PASSWORD: PASSWORD },
      stdio: ["ignore", "pipe", "pipe"],
    });
    child.stderr?.on("data", (d: Buffer) => (raw += d.toString()));
    createInterface({ input: child.stdout ?? process.stdin }).on("line", (line) => {
      raw += `${line}\n`;
      lines.push(JSON.parse(line) as Record<string, unknown>);
    });
  });

  after(async () => {
    if (child.exitCode === null) child.kill("SIGKILL");
    await plug.close();
    await plane.stop();
  });

  it("serves CA over mTLS and reads plugs with the credentials from its environment", async () => {
    await eventually("the serving log line", () => {
      assert.ok(lines.some((l) => l.message === "serving"), raw);
    }, 20_000);
    const serving = lines.find((l) => l.message === "serving");
    const address = String(serving?.grpc);
    const client = createCloudProviderClient(
      address,
      credentials.createSsl(pki.read(pki.ca), pki.read(pki.clientKey), pki.read(pki.clientCert)),
    );
    assert.equal((await client.call("refresh", {})).error, undefined);
    assert.equal((await client.call("nodeGroupIncreaseSize", { id: "workers", delta: 1 })).error, undefined);
    client.close();
    assert.equal(plug.state("Relay"), true);
    // The first request carries no credentials; the device's 401 asks for Basic, sent up front from then on.
    assert.deepEqual(plug.calls.slice(0, 2).map((c) => [c.auth, c.status]), [["none", 401], ["basic", 200]]);
    assert.ok(plug.calls.slice(1).every((c) => c.auth === "basic"));
  });

  it("stops cleanly on SIGTERM and never logs the plug password", async () => {
    child.kill("SIGTERM");
    const [code] = (await once(child, "exit")) as [number | null];
    assert.equal(code, 0);
    assert.ok(lines.some((l) => l.message === "stopped"), raw);
    assert.ok(!raw.includes(PASSWORD));
  });
});
