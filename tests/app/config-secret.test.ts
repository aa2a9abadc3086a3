import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { format, inspect } from "node:util";
import { Secret } from "../../src/adapters/secret.ts";

describe("Secret", () => {
  const secret = new Secret("hunter2");

  it("hands out its value through reveal()", () => {
    assert.equal(secret.reveal(), "hunter2");
  });

  it("shows [redacted] when turned into text", () => {
    assert.equal(String(secret), "[redacted]");
    assert.equal(`password=${String(secret)}`, "password=[redacted]");
    assert.equal(format("%s %o %O %j", secret, secret, secret, secret), "[redacted] [redacted] [redacted] \"[redacted]\"");
  });

  it("shows [redacted] in JSON and util.inspect, also nested", () => {
    assert.equal(JSON.stringify({ password: secret }), '{"password":"[redacted]"}');
    assert.equal(inspect({ password: secret }, { showHidden: true, depth: Infinity }), "{ password: [redacted] }");
  });
});
