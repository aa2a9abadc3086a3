// The Redfish test BMC itself (tests/harness/redfish): what the real sushy-emulator with its fake driver does
// on the requests the Redfish adapter sends, so that the adapter's tests rest on observed behaviour.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { request as httpsRequest } from "node:https";
import { startRedfish, type RunningRedfish } from "../../harness/redfish/index.ts";

interface Answer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly body: string;
}

interface CallOptions {
  readonly ca?: string;
  readonly credentials?: { readonly username: string; readonly password: string } | "none";
  readonly body?: unknown;
}

describe("the sushy-emulator test BMC", () => {
  let bmc: RunningRedfish;
  let startedInMs: number;

  before(async () => {
    const started = performance.now();
    bmc = await startRedfish({ systems: [{ id: "System.Embedded.1", power: "On" }, { id: "2", name: "node-2" }, { id: "3" }] });
    startedInMs = performance.now() - started;
  });
  after(async () => { await bmc.stop(); });

  function call(method: "GET" | "POST", path: string, options: CallOptions = {}): Promise<Answer> {
    const credentials = options.credentials ?? { username: bmc.username, password: bmc.password };
    const headers: Record<string, string> = { accept: "application/json" };
    if (credentials !== "none") {
      headers.authorization = `Basic ${Buffer.from(`${credentials.username}:${credentials.password}`).toString("base64")}`;
    }
    const body = options.body === undefined ? undefined : JSON.stringify(options.body);
    if (body !== undefined) headers["content-type"] = "application/json";
    return new Promise((resolve, reject) => {
      const request = httpsRequest(`${bmc.url}${path}`, { method, headers, ca: options.ca ?? readFileSync(bmc.caFile, "utf8"), timeout: 10_000 }, (response) => {
        const chunks: Buffer[] = [];
        response.on("data", (chunk: Buffer) => chunks.push(chunk));
        response.once("end", () => { resolve({ status: response.statusCode ?? 0, headers: response.headers, body: Buffer.concat(chunks).toString("utf8") }); });
        response.once("error", reject);
      });
      request.once("timeout", () => request.destroy(new Error("timed out")));
      request.once("error", reject);
      request.end(body);
    });
  }

  async function powerStateOf(id: string): Promise<unknown> {
    const answer = await call("GET", `/redfish/v1/Systems/${encodeURIComponent(id)}`);
    assert.equal(answer.status, 200, answer.body);
    return (JSON.parse(answer.body) as { PowerState?: unknown }).PowerState;
  }

  const reset = (id: string, resetType: string): Promise<Answer> =>
    call("POST", `/redfish/v1/Systems/${encodeURIComponent(id)}/Actions/ComputerSystem.Reset`, { body: { ResetType: resetType } });

  it("starts within a few seconds", (t) => {
    t.diagnostic(`sushy-emulator ready in ${Math.round(startedInMs)} ms`);
    assert.ok(startedInMs < 20_000, `${Math.round(startedInMs)} ms`);
  });

  describe("TLS", () => {
    it("is trusted with the CA it was given", async () => {
      const answer = await call("GET", "/redfish/v1/", { credentials: "none" });
      assert.equal(answer.status, 200);
      assert.equal(typeof (JSON.parse(answer.body) as { RedfishVersion?: unknown }).RedfishVersion, "string");
    });

    it("is refused by a client that trusts another CA", async () => {
      const before = bmc.requests().length;
      await assert.rejects(call("GET", "/redfish/v1/", { ca: readFileSync(bmc.strangerCaFile, "utf8") }), (error: NodeJS.ErrnoException) => {
        assert.match(error.code ?? "", /CERT|SIGNATURE|ISSUER/u, error.message);
        return true;
      });
      assert.equal(bmc.requests().length, before, "nothing was served");
    });
  });

  describe("authentication", () => {
    it("serves the systems with the right Basic credentials, with their ids and start states", async () => {
      assert.deepEqual(bmc.systems, ["System.Embedded.1", "2", "3"]);
      assert.equal(await powerStateOf("System.Embedded.1"), "On");
      assert.equal(await powerStateOf("2"), "Off");
    });

    for (const [what, credentials] of [["no credentials", "none"], ["a wrong password", { username: "plugpool", password: "wrong" }], ["an unknown user", { username: "root", password: "calvin" }]] as const) {
      it(`answers 401 with a Basic challenge to ${what}`, async () => {
        const answer = await call("GET", "/redfish/v1/Systems/2", { credentials });
        assert.equal(answer.status, 401);
        assert.match(String(answer.headers["www-authenticate"]), /^Basic /u);
      });
    }

    it("has no session service: POST /redfish/v1/SessionService/Sessions answers 404", async () => {
      const answer = await call("POST", "/redfish/v1/SessionService/Sessions", { body: { UserName: bmc.username, Password: bmc.password } });
      assert.equal(answer.status, 404);
      assert.equal(answer.headers["x-auth-token"], undefined);
    });
  });

  describe("addressing", () => {
    it("answers 404 for an unknown system, to a read and to a Reset", async () => {
      assert.equal((await call("GET", "/redfish/v1/Systems/nope")).status, 404);
      assert.equal((await reset("nope", "On")).status, 404);
    });

    it("redirects a system's Name to its Id with 307", async () => {
      const answer = await call("GET", "/redfish/v1/Systems/node-2");
      assert.equal(answer.status, 307);
      assert.equal(answer.headers.location, "/redfish/v1/Systems/2");
    });
  });

  describe("ComputerSystem.Reset", () => {
    it("answers 204 to On at once and applies it at its apply time, the whole second plus 1 to 11 s, keeping PowerState Off meanwhile", async () => {
      const sentAt = Date.now() / 1000;
      assert.equal((await reset("2", "On")).status, 204);
      const pending = await bmc.pending("2");
      assert.equal(pending?.state, "On");
      assert.ok(pending.applyAt >= Math.floor(sentAt) + 1 && pending.applyAt <= Math.ceil(sentAt) + 11, JSON.stringify(pending));
      if (pending.applyAt > Date.now() / 1000 + 0.2) assert.equal(await powerStateOf("2"), "Off");
      const deadline = Date.now() + 13_000;
      while ((await powerStateOf("2")) !== "On") {
        assert.ok(Date.now() < deadline, "On applied within 11 s");
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
      assert.ok(Date.now() / 1000 >= pending.applyAt, "not before its apply time");
      assert.equal(await bmc.pending("2"), undefined);
    });

    for (const resetType of ["ForceOff", "GracefulShutdown"]) {
      it(`records ${resetType} as a pending Off, which settle() makes apply at the next read`, async () => {
        await bmc.setPower("3", "On");
        assert.equal((await reset("3", resetType)).status, 204);
        assert.equal((await bmc.pending("3"))?.state, "Off");
        await bmc.settle("3");
        assert.equal(await powerStateOf("3"), "Off");
        assert.equal(await bmc.pending("3"), undefined);
      });
    }

    it("records nothing for a Reset towards the state the system already has", async () => {
      await bmc.setPower("3", "Off");
      assert.equal((await reset("3", "ForceOff")).status, 204);
      assert.equal(await bmc.pending("3"), undefined);
    });

    it("answers 501 to a ResetType it does not know", async () => {
      assert.equal((await reset("3", "PushPowerButton")).status, 501);
    });
  });

  describe("behind the client's back", () => {
    it("shows whatever PowerState was set, and none when it was cleared", async () => {
      await bmc.setPower("3", "PoweringOff");
      assert.equal(await powerStateOf("3"), "PoweringOff");
      await bmc.setPower("3", null);
      assert.equal(await powerStateOf("3"), undefined);
      await bmc.setPower("3", "On");
      assert.equal(await powerStateOf("3"), "On");
      assert.equal(await bmc.powerState("3"), "On");
    });

    it("drops a pending Reset when the power is set", async () => {
      await bmc.setPower("3", "Off");
      await reset("3", "On");
      await bmc.setPower("3", "Off");
      assert.equal(await bmc.pending("3"), undefined);
      assert.equal(await powerStateOf("3"), "Off");
    });
  });

  it("logs each request it answered with its method, path and status", async () => {
    const before = bmc.requests().length;
    await call("GET", "/redfish/v1/Systems/3");
    await reset("3", "On");
    assert.deepEqual(bmc.requests().slice(before), [
      { method: "GET", path: "/redfish/v1/Systems/3", status: 200 },
      { method: "POST", path: "/redfish/v1/Systems/3/Actions/ComputerSystem.Reset", status: 204 },
    ]);
  });
});
