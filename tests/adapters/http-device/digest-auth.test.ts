import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { createDigestSession, digestResponse, parseDigestChallenge } from "../../../src/adapters/http-device/digest-auth.ts";

describe("digestResponse()", () => {
  it("matches the qop=auth example of RFC 2617 §3.5", () => {
    const response = digestResponse({
      algorithm: "MD5",
      username: "Mufasa",
      password: "Circle Of Life",
      realm: "testrealm@host.com",
      nonce: "dcd98b7102dd2f0e8b11d0f600bfb0c093",
      method: "GET",
      uri: "/dir/index.html",
      qop: "auth",
      nc: "00000001",
      cnonce: "0a4f113b",
    });
    assert.equal(response, "6629fae49393a05397450978507c4ef1");
  });

  const rfc7616 = {
    username: "Mufasa",
    password: "Circle of Life",
    realm: "http-auth@example.org",
    nonce: "7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v",
    method: "GET",
    uri: "/dir/index.html",
    qop: "auth" as const,
    nc: "00000001",
    cnonce: "f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ",
  };

  it("matches the MD5 example of RFC 7616 §3.9.1", () => {
    assert.equal(digestResponse({ ...rfc7616, algorithm: "MD5" }), "8ca523f5e9506fed4657c9700eebdbec");
  });

  it("matches the SHA-256 example of RFC 7616 §3.9.1", () => {
    assert.equal(
      digestResponse({ ...rfc7616, algorithm: "SHA-256" }),
      "753927fa0e85d155564e2e272a28d1802ca10daf4496794697cf8db5856cb6c1",
    );
  });
});

describe("parseDigestChallenge()", () => {
  it("reads the challenge of an ESP32 with digest auth", () => {
    const challenge = parseDigestChallenge(
      'Digest realm="Login Required", qop="auth", algorithm=MD5, nonce="0123456789abcdef0123456789abcdef", opaque="fedcba9876543210fedcba9876543210"',
    );
    assert.deepEqual(challenge, {
      realm: "Login Required",
      nonce: "0123456789abcdef0123456789abcdef",
      opaque: "fedcba9876543210fedcba9876543210",
      qop: "auth",
      algorithm: "MD5",
      stale: false,
    });
  });

  it("reads stale=true", () => {
    assert.equal(parseDigestChallenge('Digest realm="r", qop="auth", nonce="n", stale=true')?.stale, true);
  });

  it("defaults the algorithm to MD5 (the ESP8266 challenge names none)", () => {
    assert.equal(parseDigestChallenge('Digest realm="Login Required", qop="auth", nonce="n", opaque="o"')?.algorithm, "MD5");
  });

  it("finds the Digest challenge among several", () => {
    assert.equal(parseDigestChallenge('Basic realm="a", Digest realm="b", nonce="n", qop="auth,auth-int"')?.realm, "b");
  });

  it("returns undefined for a Basic challenge", () => {
    assert.equal(parseDigestChallenge('Basic realm="Login Required"'), undefined);
  });

  it("returns undefined for an algorithm it cannot answer", () => {
    assert.equal(parseDigestChallenge('Digest realm="r", nonce="n", algorithm=SHA-512-256'), undefined);
  });

  it("returns undefined for a qop list without auth", () => {
    assert.equal(parseDigestChallenge('Digest realm="r", nonce="n", qop="auth-int"'), undefined);
  });

  it("returns undefined at once for a value longer than any device's challenge", () => {
    const long = `Digest realm="r", nonce="n", opaque="${"o".repeat(3000)}"`;
    assert.equal(parseDigestChallenge(long), undefined);
  });

  describe("with arbitrary text (fast-check)", () => {
    // Pieces of challenges, so that the generated text often comes close to a real one.
    const piece = fc.oneof(
      fc.constantFrom("Digest ", "digest", "Basic ", "realm=", "nonce=", "qop=", "opaque=", "algorithm=", "stale=", '"', "\\", ",", " ", "=", "auth", "MD5", "SHA-256", "true"),
      fc.string({ unit: "binary", maxLength: 20 }),
    );
    const param = fc
      .tuple(fc.constantFrom("realm", "nonce", "qop", "opaque", "algorithm", "stale", "domain"), fc.string({ unit: "binary", maxLength: 40 }), fc.boolean())
      .map(([name, value, quoted]) => `${name}=${quoted ? `"${value.replace(/["\\]/gu, "\\$&")}"` : value}`);
    const challenge = fc
      .tuple(fc.constantFrom("Digest ", "digest  ", 'Basic realm="x", Digest '), fc.array(param, { maxLength: 8 }), fc.constantFrom(", ", ",", " , "))
      .map(([scheme, params, comma]) => `${scheme}realm="r"${comma}nonce="n"${comma}${params.join(comma)}`);
    const texts = fc.oneof(
      fc.string({ unit: "binary", maxLength: 3000 }),
      fc.array(piece, { maxLength: 200 }).map((p) => p.join("")),
      challenge,
    );

    it("never throws, answers a challenge it can use or nothing, and does bounded work", () => {
      let runs = 0;
      let parsed = 0;
      let slowestMs = 0;
      fc.assert(
        fc.property(texts, (text) => {
          runs += 1;
          const start = performance.now();
          const challenge = parseDigestChallenge(text);
          slowestMs = Math.max(slowestMs, performance.now() - start);
          if (challenge === undefined) return;
          parsed += 1;
          assert.equal(typeof challenge.realm, "string");
          assert.equal(typeof challenge.nonce, "string");
          assert.ok(["MD5", "MD5-sess", "SHA-256", "SHA-256-sess"].includes(challenge.algorithm));
        }),
        { numRuns: 5000 },
      );
      console.log(`fuzz (parseDigestChallenge): ${runs} runs, ${parsed} parsed as a challenge, slowest ${slowestMs.toFixed(2)} ms`);
      assert.ok(slowestMs < 50, `one value took ${slowestMs} ms`);
    });
  });
});

describe("createDigestSession()", () => {
  const challenge = { realm: "Login Required", nonce: "abc", opaque: "xyz", qop: "auth" as const, algorithm: "MD5" as const, stale: false };
  const credentials = { username: "admin", password: "pw" };

  it("counts nonce uses in 8 hex digits", () => {
    const session = createDigestSession(challenge);
    const first = session.authorization(credentials, "GET", "/switch/Relay");
    const second = session.authorization(credentials, "GET", "/switch/Relay");
    assert.match(first, /nc=00000001/);
    assert.match(second, /nc=00000002/);
  });

  it("answers with a response that verifies against its own cnonce", () => {
    const header = createDigestSession(challenge).authorization(credentials, "POST", "/switch/Relay/turn_on");
    const get = (name: string): string => new RegExp(`(?:^Digest |, )${name}="?([^",]*)"?`).exec(header)?.[1] ?? "";
    const expected = digestResponse({
      algorithm: "MD5",
      ...credentials,
      realm: "Login Required",
      nonce: "abc",
      method: "POST",
      uri: "/switch/Relay/turn_on",
      qop: "auth",
      nc: get("nc"),
      cnonce: get("cnonce"),
    });
    assert.equal(get("response"), expected);
    assert.equal(get("opaque"), "xyz");
    assert.equal(get("uri"), "/switch/Relay/turn_on");
  });

  it("escapes quotes in the username", () => {
    const header = createDigestSession(challenge).authorization({ username: 'a"b', password: "p" }, "GET", "/");
    assert.match(header, /username="a\\"b"/);
  });
});
