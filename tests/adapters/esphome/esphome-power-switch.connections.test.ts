// Connections to a device: one socket, kept across the idle gap between two of cluster-autoscaler's Refreshes
// (10 s; fetch's pool dropped idle sockets after 4 s, so every Refresh connected anew), opened again when the
// device closed it, and never a second one at the same time. The device is a plain keep-alive HTTP server
// that counts its connections, as an ESP-IDF web_server keeps them (no idle timeout).
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { describe, it, type TestContext } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { createEsphomePowerSwitch } from "../../../src/adapters/esphome/esphome-power-switch.ts";
import { addressOf, assertPlugError } from "./support.ts";

interface Device {
  readonly url: string;
  /** Connections accepted so far. */
  readonly connections: () => number;
  /** Most connections open at one time. */
  readonly mostOpen: () => number;
  /** Closes every open connection, as an LRU purge or a reboot does. */
  readonly dropAll: () => void;
}

async function device(t: TestContext, answer: "relay" | "never" = "relay"): Promise<Device> {
  const sockets = new Set<Socket>();
  let connections = 0;
  let mostOpen = 0;
  const server: Server = createServer((req, res) => {
    if (answer === "never") return;
    setTimeout(() => res.end('{"id":"switch-relay","value":true,"state":"ON"}'), 5);
  });
  server.keepAliveTimeout = 0;
  server.on("connection", (socket: Socket) => {
    connections += 1;
    sockets.add(socket);
    mostOpen = Math.max(mostOpen, sockets.size);
    socket.once("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    connections: () => connections,
    mostOpen: () => mostOpen,
    dropAll: () => {
      for (const socket of sockets) socket.destroy();
    },
  };
}

describe("createEsphomePowerSwitch() connections", () => {
  it("reads a device again over the same socket after an idle gap longer than 4 s", async (t) => {
    const plug = await device(t);
    const power = createEsphomePowerSwitch({ timeoutMs: 1000 });
    const relay = addressOf(plug.url);
    assert.deepEqual(await power.read(relay), { on: true });
    await sleep(5000);
    assert.deepEqual(await power.read(relay), { on: true });
    assert.deepEqual(await power.read(relay), { on: true });
    assert.equal(plug.connections(), 1);
  });

  it("opens one socket to a device however many calls wait for it", async (t) => {
    const plug = await device(t);
    const power = createEsphomePowerSwitch({ timeoutMs: 2000 });
    const relays = ["Relay", "Relay 2", "Relay 3"].map((name) => addressOf(plug.url, name));
    await Promise.all([...relays, ...relays].map((relay) => power.read(relay)));
    assert.equal(plug.mostOpen(), 1);
    assert.equal(plug.connections(), 1);
  });

  it("connects again, without failing the read, when the device closed the idle socket", async (t) => {
    const plug = await device(t);
    const power = createEsphomePowerSwitch({ timeoutMs: 1000 });
    const relay = addressOf(plug.url);
    await power.read(relay);
    plug.dropAll();
    await sleep(50);
    assert.deepEqual(await power.read(relay), { on: true });
    assert.equal(plug.connections(), 2);
  });

  it("fails a read of a device that never answers as timed out, with no cause, and the next read connects anew", async (t) => {
    const plug = await device(t, "never");
    const power = createEsphomePowerSwitch({ timeoutMs: 200 });
    const relay = addressOf(plug.url);
    for (let i = 1; i <= 2; i++) {
      const error = await power.read(relay).then(() => undefined, (e: unknown) => e);
      assertPlugError(error, "plug-unreachable", /timed out after 200 ms/);
      assert.equal((error as Error).cause, undefined);
      assert.equal(plug.connections(), i);
    }
  });
});
