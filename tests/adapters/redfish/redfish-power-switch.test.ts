// The Redfish backend against a real Redfish service: sushy-emulator with its fake driver, over https with its
// own CA and Basic auth (tests/harness/redfish). The fake driver applies a Reset up to 11 s after it answered;
// the tests that need the state sooner make the pending Reset apply at once (`settle`), as a quicker BMC would.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { redfishBackend } from "../../../src/adapters/redfish/backend.ts";
import { createPowerSwitch } from "../../../src/app/power/power-switch.ts";
import { config, group, load } from "../../app/fixtures/config-builders.ts";
import type { CutGuard } from "../../../src/domain/ports.ts";
import { startRedfish, type RunningRedfish } from "../../harness/redfish/index.ts";
import { acceptAny, addressOf, assertFailure, expectDevice, failureOf } from "./support.ts";

describe("redfishBackend against sushy-emulator", () => {
  let bmc: RunningRedfish;
  before(async () => {
    bmc = await startRedfish({ systems: 9 });
  });
  after(async () => { await bmc.stop(); });

  const power = (timeoutMs = 3000) => redfishBackend.create({ timeoutMs });
  const system = (id: string, section: Record<string, unknown> = {}) => addressOf({ url: bmc.url, system: id, caFile: bmc.caFile, ...section }, bmc);
  const secrets = () => [bmc.password, Buffer.from(`${bmc.username}:${bmc.password}`).toString("base64")];
  const posts = (from: number) => bmc.requests().slice(from).filter((r) => r.method === "POST");

  /** Makes each Reset the system gets apply at once, until `work` settles. */
  async function settling<T>(id: string, work: Promise<T>): Promise<T> {
    const state = { done: false };
    const finished = work.finally(() => { state.done = true; });
    while (!state.done) {
      await bmc.settle(id);
      await Promise.race([finished.catch(() => undefined), sleep(150)]);
    }
    return finished;
  }

  describe("read", () => {
    it("reads Off as off and On as on", async () => {
      await bmc.setPower("system-1", "Off");
      assert.deepEqual(await power().read(system("system-1")), { on: false });
      await bmc.setPower("system-1", "On");
      assert.deepEqual(await power().read(system("system-1")), { on: true });
    });

    for (const state of ["PoweringOff", "PoweringOn", "Paused"]) {
      it(`reads ${state} as on: only Off is off`, async () => {
        await bmc.setPower("system-1", state);
        assert.deepEqual(await power().read(system("system-1")), { on: true });
      });
    }

    for (const [what, state] of [["no PowerState", null], ["a PowerState it does not know", "Unknown"]] as const) {
      it(`fails a read that shows ${what}, never taking it as off`, async () => {
        await bmc.setPower("system-1", state);
        const error = await failureOf(() => power().read(system("system-1")));
        assertFailure(error, "plug-bad-answer", /^reading BMC https:\/\/127\.0\.0\.1:\d+ system "system-1": GET \/redfish\/v1\/Systems\/system-1 answered without a PowerState plugpool knows$/);
      });
    }
  });

  describe("turnOn", () => {
    it("sends Reset On and resolves once the BMC shows On, however long its delay within the timeout", async () => {
      await bmc.setPower("system-2", "Off");
      const from = bmc.requests().length;
      assert.deepEqual(await power(13_000).turnOn(system("system-2"), { device: acceptAny }), { on: true });
      assert.equal(await bmc.powerState("system-2"), "On");
      assert.deepEqual(posts(from).map((r) => r.path), ["/redfish/v1/Systems/system-2/Actions/ComputerSystem.Reset"]);
    });

    it("sends nothing to a system already On", async () => {
      await bmc.setPower("system-2", "On");
      const from = bmc.requests().length;
      assert.deepEqual(await power().turnOn(system("system-2"), { device: acceptAny }), { on: true });
      assert.deepEqual(posts(from), []);
    });
  });

  describe("turnOff", () => {
    it("asks the guard after reading the state, then sends ForceOff and resolves once Off shows", async () => {
      await bmc.setPower("system-3", "On");
      const from = bmc.requests().length;
      let seenByGuard: string[] = [];
      const guard: CutGuard = () => {
        seenByGuard = bmc.requests().slice(from).map((r) => `${r.method} ${r.path}`);
        return Promise.resolve(true);
      };
      const device = expectDevice("uuid system-3");
      assert.deepEqual(await settling("system-3", power().turnOff(system("system-3"), guard, { device })), { on: false });
      assert.deepEqual(seenByGuard, ["GET /redfish/v1/Systems/system-3"]);
      assert.equal(device.seen.length, 1);
      assert.deepEqual(posts(from).map((r) => r.path), ["/redfish/v1/Systems/system-3/Actions/ComputerSystem.Reset"]);
      assert.equal(await bmc.powerState("system-3"), "Off");
    });

    it("sends nothing when the guard refuses, and fails as unsafe", async () => {
      await bmc.setPower("system-3", "On");
      const from = bmc.requests().length;
      const error = await failureOf(() => power().turnOff(system("system-3"), () => Promise.resolve(false), { device: acceptAny }));
      assertFailure(error, "unsafe", /^switching off BMC .* system "system-3": the power-off was refused at the BMC by the safety check$/);
      assert.deepEqual(posts(from), []);
      assert.equal(await bmc.pending("system-3"), undefined);
      assert.equal(await bmc.powerState("system-3"), "On");
    });

    it("sends no ForceOff to a system that answers as another, and fails as a device mismatch", async () => {
      await bmc.setPower("system-3", "On");
      const from = bmc.requests().length;
      const error = await failureOf(() => power().turnOff(system("system-3"), () => Promise.resolve(true), { device: expectDevice("uuid system-4") }));
      assertFailure(error, "device-mismatch", /^switching off BMC .* system "system-3": the device answers as uuid system-3, not as the device expected there; nothing was sent$/, secrets());
      assert.deepEqual(posts(from), []);
      assert.equal(await bmc.powerState("system-3"), "On");
    });

    it("reads the state of a system only when it answers as the one expected", async () => {
      await bmc.setPower("system-3", "Off");
      assert.deepEqual(await power().read(system("system-3"), { device: expectDevice("uuid system-3") }), { on: false });
      const error = await failureOf(() => power().read(system("system-3"), { device: expectDevice("uuid system-4") }));
      assertFailure(error, "device-mismatch", /^reading BMC .* system "system-3": the device answers as uuid system-3, not as the device expected there; no state was taken from it$/, secrets());
    });

    it("sends ForceOff to a system PoweringOff, which is not off yet", async () => {
      await bmc.setPower("system-3", "PoweringOff");
      const from = bmc.requests().length;
      assert.deepEqual(await settling("system-3", power().turnOff(system("system-3"), () => Promise.resolve(true), { device: acceptAny })), { on: false });
      assert.equal(posts(from).length, 1);
    });

    it("neither asks the guard nor sends anything to a system already Off", async () => {
      await bmc.setPower("system-3", "Off");
      const from = bmc.requests().length;
      let asked = false;
      assert.deepEqual(await power().turnOff(system("system-3"), () => { asked = true; return Promise.resolve(true); }, { device: acceptAny }), { on: false });
      assert.equal(asked, false);
      assert.deepEqual(posts(from), []);
    });
  });

  describe("shutdown", () => {
    it("asks the guard after reading the state, then sends GracefulShutdown and resolves once the BMC took it, without waiting for Off", async () => {
      await bmc.setPower("system-4", "On");
      const from = bmc.requests().length;
      let requestsWhenAsked: number | undefined;
      await power().shutdown(system("system-4"), () => {
        requestsWhenAsked = bmc.requests().length - from;
        return Promise.resolve(true);
      }, { device: acceptAny });
      assert.equal(requestsWhenAsked, 1, "the state was read before the guard was asked, and nothing sent after it yet");
      assert.deepEqual(posts(from).map((r) => r.path), ["/redfish/v1/Systems/system-4/Actions/ComputerSystem.Reset"]);
      assert.equal((await bmc.pending("system-4"))?.state, "Off");
    });

    it("sends nothing when the guard refuses, and fails as unsafe", async () => {
      await bmc.setPower("system-4", "On");
      const from = bmc.requests().length;
      const error = await failureOf(() => power().shutdown(system("system-4"), () => Promise.resolve(false), { device: acceptAny }));
      assertFailure(error, "unsafe", /^shutting down BMC .* system "system-4": the power-off was refused at the BMC by the safety check$/);
      assert.deepEqual(posts(from), []);
      assert.equal(await bmc.pending("system-4"), undefined);
    });

    for (const state of ["Off", "PoweringOff"]) {
      it(`sends nothing to a system already ${state}`, async () => {
        await bmc.setPower("system-4", state);
        const from = bmc.requests().length;
        await power().shutdown(system("system-4"), () => Promise.resolve(true), { device: acceptAny });
        assert.deepEqual(posts(from), []);
      });
    }
  });

  describe("refusals", () => {
    it("fails with wrong credentials as plug-unauthorized, and sends no Reset", async () => {
      await bmc.setPower("system-5", "On");
      const from = bmc.requests().length;
      const wrong = addressOf({ url: bmc.url, system: "system-5", caFile: bmc.caFile }, { username: bmc.username, password: "not-the-password" });
      const error = await failureOf(() => power().turnOff(wrong, () => Promise.resolve(true), { device: acceptAny }));
      assertFailure(error, "plug-unauthorized", /: the BMC rejected the credentials \(GET \/redfish\/v1\/Systems\/system-5 answered HTTP 401\)$/, [...secrets(), "not-the-password"]);
      assert.deepEqual(posts(from), []);
    });

    it("fails for an unknown system as plug-entity-not-found, before any guard or Reset", async () => {
      const from = bmc.requests().length;
      let asked = false;
      const error = await failureOf(() => power().turnOff(system("system-99"), () => { asked = true; return Promise.resolve(true); }, { device: acceptAny }));
      assertFailure(error, "plug-entity-not-found", /system "system-99": not found \(GET \/redfish\/v1\/Systems\/system-99 answered HTTP 404\)$/);
      assert.equal(asked, false);
      assert.deepEqual(posts(from), []);
    });

    it("does not follow the redirect a system's Name gets, and says to give its Id", async () => {
      const error = await failureOf(() => power().read(system("system-6-name")));
      assertFailure(error, "plug-bad-answer", /answered HTTP 307, a redirect, which is not followed: give the system's Id as \/redfish\/v1\/Systems lists it$/);
    });

    it("refuses a BMC whose certificate the configured CA did not issue, and nothing reaches it", async () => {
      await bmc.setPower("system-6", "On");
      const from = bmc.requests().length;
      const stranger = system("system-6", { caFile: bmc.strangerCaFile });
      assertFailure(await failureOf(() => power().read(stranger)), "plug-unreachable", /: the BMC's TLS certificate is not trusted \(UNABLE_TO_VERIFY_LEAF_SIGNATURE\): check caFile$/);
      // Nothing was sent, so a refused TLS is "not done", never "unconfirmed".
      assert.equal((await failureOf(() => power().turnOff(stranger, () => Promise.resolve(true), { device: acceptAny }))).code, "plug-unreachable");
      assert.deepEqual(bmc.requests().slice(from), []);
      const withoutCa = addressOf({ url: bmc.url, system: "system-6" }, bmc);
      assert.equal((await failureOf(() => power().read(withoutCa))).code, "plug-unreachable", "the system's trust roots do not trust a private CA");
    });

    it("cannot log in with auth: session, the emulator having no session service", async () => {
      const error = await failureOf(() => power().read(system("system-7", { auth: "session" })));
      assertFailure(error, "plug-unauthorized", /: the BMC refused the session login \(POST \/redfish\/v1\/SessionService\/Sessions\) with HTTP 401: wrong credentials, or no session service \(then use auth: basic\)$/, secrets());
    });
  });

  it("switches a node of a loaded configuration through plugpool's power switch, credentials from files", async () => {
    const dir = mkdtempSync(join(tmpdir(), "plugpool-redfish-credentials-"));
    try {
      writeFileSync(join(dir, "username"), `${bmc.username}\n`);
      writeFileSync(join(dir, "password"), `${bmc.password}\n`);
      const section = { url: bmc.url, system: "system-9", caFile: bmc.caFile, usernameFile: join(dir, "username"), passwordFile: join(dir, "password"), gracefulShutdown: true };
      const loaded = load(config([group("servers", [{ name: "server-9", redfish: section }])]));
      const machine = loaded.pool.groups[0]?.machines[0];
      assert.ok(machine);
      await bmc.setPower("system-9", "Off");
      const routed = createPowerSwitch(loaded.powerControls, new Map([["redfish", 3000]]));
      assert.deepEqual(await routed.read(machine.power), { on: false });
      await bmc.setPower("system-9", "On");
      assert.equal((await routed.probe(machine.power)).state, "on");
      await routed.shutdown(machine.power, () => Promise.resolve(true), { device: acceptAny });
      assert.equal((await bmc.pending("system-9"))?.state, "Off");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("probes the state, the Redfish version, the BMC's firmware and the system's identity for doctor", async () => {
    await bmc.setPower("system-8", "On");
    const probe = await power().probe(system("system-8"));
    assert.deepEqual(probe, {
      state: "on",
      detail: `Redfish 1.5.0; BMC firmware 1.00; PowerState On; basic auth; TLS trusting ${bmc.caFile}`,
      // sushy-emulator's fake driver gives each system its Id as its UUID, and no SerialNumber.
      identity: { id: "uuid system-8" },
    });
  });
});
