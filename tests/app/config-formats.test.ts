import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  isDnsLabel,
  isDnsSubdomain,
  isLabelValue,
  isLoopback,
  isQualifiedName,
  parseHostPort,
} from "../../src/app/config/formats.ts";
import { parsePlugUrl, switchObjectId } from "../../src/adapters/esphome/plug.ts";

function table(name: string, check: (text: string) => boolean, valid: readonly string[], invalid: readonly string[]) {
  describe(name, () => {
    for (const text of valid) {
      it(`accepts ${JSON.stringify(text)}`, () => {
        assert.equal(check(text), true);
      });
    }
    for (const text of invalid) {
      it(`rejects ${JSON.stringify(text)}`, () => {
        assert.equal(check(text), false);
      });
    }
  });
}

table("isDnsLabel()", isDnsLabel, ["a", "workers", "gpu-1", "1a", "a".repeat(63)], ["", "A", "-a", "a-", "a.b", "a_b", "a".repeat(64)]);

table(
  "isDnsSubdomain()",
  isDnsSubdomain,
  ["worker-1", "gpu-1.lab", "a.b.c", `${"a".repeat(63)}.${"b".repeat(63)}`],
  ["", "Worker", "a..b", ".a", "a.", "a_b", "a".repeat(254)],
);

table(
  "isQualifiedName()",
  isQualifiedName,
  ["pool", "example.com/pool", "nvidia.com/gpu.product", "A_b.C-d", "kubernetes.io/os", "x/y", "a".repeat(63)],
  ["", "/pool", "example.com/", "a/b/c", "-pool", "pool_", "Example.com/pool", "has space", "a".repeat(64), `${"a".repeat(254)}/x`],
);

table("isLabelValue()", isLabelValue, ["", "workers", "A_b.C-d", "a".repeat(63)], ["-x", "x-", "a b", "a/b", "a".repeat(64)]);

describe("parseHostPort()", () => {
  const valid: readonly [string, string, number][] = [
    ["127.0.0.1:8086", "127.0.0.1", 8086],
    ["0.0.0.0:0", "0.0.0.0", 0],
    ["[::1]:8086", "::1", 8086],
    ["[fe80::1]:65535", "fe80::1", 65535],
    ["localhost:80", "localhost", 80],
    ["Plugpool.Example:443", "Plugpool.Example", 443],
  ];
  for (const [text, host, port] of valid) {
    it(`reads ${text}`, () => {
      assert.deepEqual(parseHostPort(text), { host, port });
    });
  }
  for (const text of ["", "8086", ":8086", "127.0.0.1", "127.0.0.1:65536", "::1:8086", "[::1]", "[127.0.0.1]:1", "a b:1", "host:-1", "host:http"]) {
    it(`rejects ${JSON.stringify(text)}`, () => {
      assert.equal(parseHostPort(text), undefined);
    });
  }
});

table("isLoopback()", isLoopback, ["127.0.0.1", "127.255.0.9", "::1", "0:0:0:0:0:0:0:1", "::ffff:127.0.0.1", "localhost", "LocalHost"], [
  "0.0.0.0",
  "::",
  "10.0.0.1",
  "128.0.0.1",
  "::2",
  "localhost.example",
  "plugpool",
]);

describe("parsePlugUrl()", () => {
  const same: readonly [string, string][] = [
    ["http://plug.example", "http://plug.example"],
    ["http://plug.example/", "http://plug.example"],
    ["HTTP://Plug.EXAMPLE:80/", "http://plug.example"],
    ["https://plug.example:443", "https://plug.example"],
    ["https://plug.example:8443/", "https://plug.example:8443"],
    ["http://192.168.1.20", "http://192.168.1.20"],
    ["http://[FE80::1]:8080", "http://[fe80::1]:8080"],
  ];
  for (const [text, url] of same) {
    it(`normalises ${text} to ${url}`, () => {
      assert.deepEqual(parsePlugUrl(text), { ok: true, url, device: url.replace(/^https?:\/\//, "") });
    });
  }

  const devices: readonly [string, string][] = [
    ["http://plug.example.", "plug.example"],
    ["http://Plug.Example.:8080/", "plug.example:8080"],
    ["http://PLUG.example", "plug.example"],
    ["http://[::ffff:10.0.0.5]", "10.0.0.5"],
    ["http://[::ffff:a00:5]", "10.0.0.5"],
    ["http://[0:0:0:0:0:FFFF:0A00:0005]:8080", "10.0.0.5:8080"],
    ["https://[::ffff:10.0.0.5]:443", "10.0.0.5"],
    ["http://plug.example:80", "plug.example"],
    ["https://plug.example:443", "plug.example"],
    ["https://plug.example:80", "plug.example:80"],
    ["http://plug.example:443", "plug.example:443"],
    ["http://[2001:DB8::1]:8080", "[2001:db8::1]:8080"],
  ];
  for (const [text, device] of devices) {
    it(`names the device of ${text} ${device}`, () => {
      const result = parsePlugUrl(text);
      assert.equal(result.ok && result.device, device);
    });
  }

  it("refuses credentials without repeating them", () => {
    const result = parsePlugUrl("http://admin:pa55word@plug.example");
    assert.equal(result.ok, false);
    assert.ok(!JSON.stringify(result).includes("pa55word"));
  });
});

describe("switchObjectId()", () => {
  const cases: readonly [string, string][] = [
    ["Relay", "relay"],
    ["Living Room Light", "living_room_light"],
    ["Plug #1 (Kitchen)", "plug__1__kitchen_"],
    ["outlet-2", "outlet-2"],
  ];
  for (const [name, objectId] of cases) {
    it(`maps ${JSON.stringify(name)} to ${objectId}`, () => {
      assert.equal(switchObjectId(name), objectId);
    });
  }
});
