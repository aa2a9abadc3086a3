// The first ping of an /events stream, however its lines end and wherever the stream was cut.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { firstPing, identityOf } from "../../../src/adapters/esphome/device-events.ts";

const CONFIG = '{"title":"plug-worker-1","comment":"","ota":true,"log":true,"lang":"en","uptime":42}';
// Each stream, and how many characters after the ping's data line it takes to know the ping is whole: its line
// end and the blank line's (whose CR is enough, as a CR alone ends a line).
const STREAMS = {
  "IDF (CRLF, an empty first line)": [`\r\nretry: 30000\r\nid: 1200\r\nevent: ping\r\ndata: ${CONFIG}\r\n\r\nevent: state\r\ndata: {}\r\n\r\n`, 3],
  "the async server (LF)": [`retry: 30000\nid: 1200\nevent: ping\ndata: ${CONFIG}\n\nevent: state\ndata: {}\n\n`, 2],
  "CR alone": [`retry: 30000\rid: 1200\revent: ping\rdata: ${CONFIG}\r\r`, 2],
} as const;

describe("firstPing()", () => {
  for (const [framing, [stream, after]] of Object.entries(STREAMS)) {
    it(`finds the ping's data once its blank line arrived, and not before (${framing})`, () => {
      const whole = stream.indexOf(CONFIG) + CONFIG.length + after;
      const first = Array.from({ length: stream.length + 1 }, (_, cut) => cut).find((cut) => firstPing(stream.slice(0, cut)) !== undefined);
      assert.equal(first, whole);
      assert.deepEqual(firstPing(stream), { data: CONFIG });
    });
  }

  it("skips other events and comments before the ping, and joins its data lines", () => {
    assert.deepEqual(firstPing(': hello\n\nevent: state\ndata: {}\n\nevent: ping\ndata: {"title":\ndata: "x"}\n\n'), { data: '{"title":\n"x"}' });
  });

  it("tells a ping without data", () => {
    assert.deepEqual(firstPing("\r\nevent: ping\r\n\r\n"), { data: undefined });
  });
});

describe("identityOf()", () => {
  const answer = (body: string, status = 200) => ({ status, body, contentType: "text/event-stream", bytes: body.length });

  it("is the title, quoted, with the uptime", () => {
    assert.deepEqual(identityOf(answer(STREAMS["the async server (LF)"][0]), []), { id: 'name "plug-worker-1"', uptimeSeconds: 42 });
  });

  it("quotes what a title holds, so no name can pass for another", () => {
    assert.deepEqual(identityOf(answer('event: ping\ndata: {"title":"a\\" b\\n"}\n\n'), []), { id: 'name "a\\" b\\n"' });
  });

  for (const [what, body, message] of [
    ["a stream that ends before its ping", "event: state\ndata: {}\n\n", /ended before its first ping event/u],
    ["a ping without a title", 'event: ping\ndata: {"uptime":3}\n\n', /without a title plugpool can use/u],
    ["a title of no use", 'event: ping\ndata: {"title":""}\n\n', /without a title plugpool can use/u],
  ] as const) {
    it(`fails as a bad answer on ${what}`, () => {
      assert.throws(() => identityOf(answer(body), []), (e: Error & { code?: string }) => e.code === "plug-bad-answer" && message.test(e.message));
    });
  }
});
