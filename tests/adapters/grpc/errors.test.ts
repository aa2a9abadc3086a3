import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Code, ConnectError } from "@connectrpc/connect";
import { PlugpoolError } from "../../../src/domain/index.ts";
import { cancelled } from "../../../src/domain/lock.ts";
import { MAX_MESSAGE_CHARS, boundedMessage, toConnectError } from "../../../src/adapters/grpc/errors.ts";

const aborted = (reason: unknown): AbortSignal => AbortSignal.abort(reason);

describe("toConnectError()", () => {
  it("maps a cancelled call to DeadlineExceeded when its signal's reason is a deadline", () => {
    const deadlines = [
      new ConnectError("the operation timed out", Code.DeadlineExceeded),
      new DOMException("signal timed out", "TimeoutError"),
      Object.assign(new Error("timed out"), { name: "TimeoutError" }),
    ];
    for (const reason of deadlines) assert.equal(toConnectError(cancelled(aborted(reason))).code, Code.DeadlineExceeded, String(reason));
  });

  it("maps any other cancelled call to Canceled", () => {
    const cancels = [
      new ConnectError("client cancelled", Code.Canceled),
      new ConnectError("stream reset", Code.Aborted),
      new DOMException("This operation was aborted", "AbortError"),
      undefined,
      "shutting down",
    ];
    for (const reason of cancels) assert.equal(toConnectError(cancelled(aborted(reason))).code, Code.Canceled, String(reason));
  });

  it("finds a cancellation wrapped as another error's cause", () => {
    const wrapped = new Error("step failed", { cause: cancelled(aborted(new ConnectError("late", Code.DeadlineExceeded))) });
    assert.equal(toConnectError(wrapped).code, Code.DeadlineExceeded);
  });

  it("maps an unconfirmed switch command to Unavailable, keeping the domain's message", () => {
    const error = toConnectError(new PlugpoolError("plug-unconfirmed", "switching on worker-1: no answer from the plug"));
    assert.equal(error.code, Code.Unavailable);
    assert.equal(error.rawMessage, "switching on worker-1: no answer from the plug");
  });

  it("maps a passive instance's refusal to Unavailable, keeping the name of the acting one", () => {
    const error = toConnectError(new PlugpoolError("not-leader", "deleting nodes: refused, this plugpool is not the acting one (the acting plugpool is pod-b_1)"));
    assert.equal(error.code, Code.Unavailable);
    assert.match(error.rawMessage, /the acting plugpool is pod-b_1/);
  });

  it("bounds every message sent to the client, from the domain or from Connect", () => {
    const long = "worker-1, ".repeat(5_000);
    for (const error of [toConnectError(new PlugpoolError("instance-not-found", long)), toConnectError(new ConnectError(long, Code.NotFound))]) {
      assert.equal(error.code, Code.NotFound);
      assert.ok(error.rawMessage.length <= MAX_MESSAGE_CHARS);
      assert.ok(error.rawMessage.startsWith("worker-1, worker-1, "));
    }
    const short = new ConnectError("short", Code.NotFound);
    assert.equal(toConnectError(short), short);
  });

  it("hides unexpected errors behind Internal", () => {
    const error = toConnectError(new Error("postgres://admin:hunter2@db"));
    assert.equal(error.code, Code.Internal);
    assert.equal(error.rawMessage, "internal error");
  });
});

describe("boundedMessage()", () => {
  it("keeps a message of up to the bound as it is", () => {
    const message = "a".repeat(MAX_MESSAGE_CHARS);
    assert.equal(boundedMessage(message), message);
  });

  it("cuts a longer one to the bound, saying how many characters were left out", () => {
    const message = "b".repeat(10_000);
    const bounded = boundedMessage(message);
    assert.ok(bounded.length <= MAX_MESSAGE_CHARS && bounded.length > MAX_MESSAGE_CHARS - 8, `${bounded.length} characters`);
    const [, kept = "", left = ""] = /^(b+)… \((\d+) more characters\)$/.exec(bounded) ?? [];
    assert.equal(kept.length + Number(left), message.length);
  });

  it("never splits a surrogate pair", () => {
    for (let pad = 0; pad < 4; pad++) {
      const bounded = boundedMessage("x".repeat(pad) + "😀".repeat(2_000));
      assert.ok(bounded.isWellFormed(), `pad ${pad}`);
      assert.ok(bounded.length <= MAX_MESSAGE_CHARS);
    }
  });
});
