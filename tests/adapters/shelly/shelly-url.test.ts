import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { normaliseShellyUrl } from "../../../src/adapters/shelly/shelly-url.ts";

describe("normaliseShellyUrl()", () => {
  it("names one device however its URL is spelled", () => {
    const devices = ["http://Plug-2.lan.", "https://plug-2.lan:443", "http://plug-2.lan:80/"].map((u) => normaliseShellyUrl(u));
    assert.deepEqual(devices.map((d) => (d.ok ? d.device : d.expected)), ["plug-2.lan", "plug-2.lan", "plug-2.lan"]);
    assert.deepEqual(normaliseShellyUrl("http://[::ffff:10.0.0.5]:8080"), { ok: true, url: "http://[::ffff:a00:5]:8080", device: "10.0.0.5:8080" });
  });

  it("keeps a port that is not the scheme's default", () => {
    assert.deepEqual(normaliseShellyUrl("http://192.168.1.52:8080"), { ok: true, url: "http://192.168.1.52:8080", device: "192.168.1.52:8080" });
  });

  it("refuses what is not a device's base URL, and credentials in it, without repeating them", () => {
    for (const text of ["192.168.1.52", "ftp://plug", "http://plug/rpc", "http://plug/?x=1", "http:plug", "http://pl ug"]) {
      assert.equal(normaliseShellyUrl(text).ok, false, text);
    }
    const withPassword = normaliseShellyUrl("http://admin:hunter2@plug");
    assert.ok(!withPassword.ok && !withPassword.expected.includes("hunter2"));
  });
});
