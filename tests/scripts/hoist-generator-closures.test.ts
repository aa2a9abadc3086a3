// The bundle's closure conversion of generator functions made per call: every factory below runs against the
// module as written and as rewritten, and the rewritten one must give the same results while making its
// generators from one module-level function (generators made by the same function share a prototype; a
// function expression evaluated per call gives each call's generators a prototype of their own).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { describe, it } from "node:test";
import { hoistGeneratorClosures } from "../../scripts/hoist-generator-closures.ts";
import { nativeAsyncGenerators } from "../../scripts/native-async-generators.ts";

const SOURCE = `
const offset = 1000;
export function scaled(factor) { return async function* (iterable) { for await (const x of iterable) yield x * factor + offset; }; }
export function labelled(label) { const prefix = label + ":"; return function* (items) { for (const x of items) yield prefix + x; }; }
export function withHelper(n) { function add(x) { return x + n; } return async function* (items) { for (const x of items) yield add(x); }; }
export function arrowInside(list) { return async function* () { yield list.map((x) => x * 2); }; }
export function shorthand(a, b) { return function* () { yield { a, b }; }; }
export function defaults(base) { return async function* (x = 1, ...rest) { yield base + x + rest.length; }; }
export function destructured({ k }) { return function* ([first]) { yield k + first; }; }
export function perItem(items) { const out = []; for (const item of items) out.push(function* () { yield item; }); return out; }
export function named(n) { return async function* counter(limit) { for (let i = 0; i < limit; i++) yield i + n; }; }
export function finallyRuns(log) { return async function* () { try { yield 1; yield 2; } finally { log.push("finally"); } }; }
export function nested(n) { return (m) => async function* () { yield n + m; }; }
export function sent(prefix) { return function* () { const a = yield prefix; yield prefix + a; }; }
// Left in place: each would change behaviour if its binding were passed by value, or if it lost its own this,
// arguments or name.
export function reassigned() { let n = 1; const gen = function* () { yield n; yield n; }; return { gen, set(v) { n = v; } }; }
export function writesCaptured() { let n = 0; return function* () { n++; yield n; }; }
export function varInLoop() { let started; for (let k = 0; k < 2; k++) { var x = "pass " + k; if (k === 0) started = (function* () { yield x; })(); } return started; }
export function declaredAfter() { const gen = function* () { yield later; }; const started = gen(); const later = "late"; return started; }
export function usesThis() { return function* () { yield this?.tag; }; }
export function usesArguments() { return function* () { yield arguments.length; }; }
export function selfReferring(depth) { return function* again(d = depth) { yield d; if (d > 0) yield* again(d - 1); }; }
`;

const LEFT = ["n is assigned", "n is assigned", "x is a var in a loop", "later is declared after it", "it uses this", "it uses arguments", "it refers to itself as again"];

type Factory = (...args: never[]) => unknown;
type Module = Record<string, Factory>;

async function load(code: string): Promise<Module> {
  return (await import(`data:text/javascript,${encodeURIComponent(code)}`)) as Module;
}

async function all(iterable: AsyncIterable<unknown> | Iterable<unknown>): Promise<unknown[]> {
  const out: unknown[] = [];
  for await (const x of iterable) out.push(x);
  return out;
}

async function* from(...items: number[]): AsyncGenerator<number> {
  for (const item of items) yield await Promise.resolve(item);
}

type Gen = (...args: unknown[]) => AsyncIterable<unknown> & Iterable<unknown> & Iterator<unknown, unknown, unknown>;

/** Each scenario: what the factory gives, and a call of it from two factory calls (to compare prototypes). */
const scenarios: Record<string, { run: (m: Module) => Promise<unknown>; twice?: (m: Module) => [object, object] }> = {
  "a captured parameter and a module-level binding": {
    run: async (m) => all((m.scaled as (f: number) => Gen)(3)(from(1, 2))),
    twice: (m) => [(m.scaled as (f: number) => Gen)(1)(from()), (m.scaled as (f: number) => Gen)(2)(from())],
  },
  "a captured const and a sync generator": {
    run: async (m) => all((m.labelled as (l: string) => Gen)("x")([1, 2])),
    twice: (m) => [(m.labelled as (l: string) => Gen)("a")([]), (m.labelled as (l: string) => Gen)("b")([])],
  },
  "a captured function declaration": { run: async (m) => all((m.withHelper as (n: number) => Gen)(10)([1, 2])) },
  "an arrow function inside": { run: async (m) => all((m.arrowInside as (l: number[]) => Gen)([1, 2])()) },
  "shorthand properties": { run: async (m) => all((m.shorthand as (a: number, b: number) => Gen)(1, 2)()) },
  "default and rest parameters": {
    run: async (m) => {
      const gen = (m.defaults as (b: number) => Gen)(100);
      return [await all(gen()), await all(gen(5, 6, 7))];
    },
  },
  "destructuring parameters": { run: async (m) => all((m.destructured as (o: { k: number }) => Gen)({ k: 1 })([41])) },
  "a loop's per-iteration binding": {
    run: async (m) => Promise.all(((m.perItem as (i: string[]) => Gen[])(["a", "b", "c"])).map((g) => all(g()))),
  },
  "a named generator keeps its name in use": { run: async (m) => all((m.named as (n: number) => Gen)(5)(3)) },
  "finally on an early return": {
    run: async (m) => {
      const log: string[] = [];
      for await (const x of (m.finallyRuns as (l: string[]) => Gen)(log)()) {
        log.push(String(x));
        break;
      }
      return log;
    },
  },
  "bindings of two enclosing functions": { run: async (m) => all((m.nested as (n: number) => (m: number) => Gen)(1)(2)()) },
  "values sent with next": {
    run: (m) => {
      const it = (m.sent as (p: string) => Gen)("p")();
      return Promise.resolve([it.next(), it.next("q"), it.next()]);
    },
  },
  "a binding assigned while a generator is suspended": {
    run: (m) => {
      const bindings = (m.reassigned as () => { gen: Gen; set: (v: number) => void })();
      const it = bindings.gen();
      const first = it.next();
      bindings.set(2);
      return Promise.resolve([first, it.next()]);
    },
  },
  "a binding the generator assigns": {
    run: async (m) => {
      const gen = (m.writesCaptured as () => Gen)();
      return [await all(gen()), await all(gen())];
    },
  },
  "a var assigned again by its loop while a generator is suspended": { run: async (m) => all((m.varInLoop as () => Iterable<unknown>)()) },
  "a generator made before a binding it uses is initialised": { run: async (m) => all((m.declaredAfter as () => Iterable<unknown>)()) },
  "this": { run: async (m) => all((m.usesThis as () => Gen)().call({ tag: "the receiver" })) },
  "arguments": { run: async (m) => all((m.usesArguments as () => Gen)()(1, 2)) },
  "a generator that calls itself by name": { run: async (m) => all((m.selfReferring as (d: number) => Gen)(2)()) },
};

describe("generator functions made per call, moved to module level for the bundle", async () => {
  const hoisted = hoistGeneratorClosures(SOURCE, "source.js");
  const original = await load(SOURCE);
  const rewritten = await load(hoisted.code);

  it("moves every generator it can and names why it left each other one", () => {
    assert.equal(hoisted.count, 12);
    assert.deepEqual(hoisted.skipped.map((s) => s.replace(/^source\.js:\d+:\d+: /, "")), LEFT);
  });

  for (const [name, scenario] of Object.entries(scenarios)) {
    it(`behaves as written: ${name}`, async () => {
      assert.deepEqual(await scenario.run(rewritten), await scenario.run(original));
    });
  }

  for (const [name, scenario] of Object.entries(scenarios)) {
    const { twice } = scenario;
    if (twice === undefined) continue;
    it(`makes each call's generators from one function: ${name}`, () => {
      const [a, b] = twice(original);
      assert.notEqual(Object.getPrototypeOf(a), Object.getPrototypeOf(b), "as written, each call has a function of its own");
      const [c, d] = twice(rewritten);
      assert.equal(Object.getPrototypeOf(c), Object.getPrototypeOf(d));
    });
  }

  it("leaves a module without nested generators as it was", () => {
    const plain = "export function* top() { yield 1; }\nexport const f = () => 2;\n";
    assert.deepEqual(hoistGeneratorClosures(plain, "plain.js"), { code: plain, count: 0, skipped: [] });
  });

  it("moves every stage of Connect's server pipeline", () => {
    // Connect's protocol modules as the bundle loads them: lowered generators made native first.
    const require = createRequire(import.meta.url);
    const esm = join(dirname(require.resolve("@connectrpc/connect/protocol")), "..", "..", "esm", "protocol");
    for (const [file, least] of [["async-iterable.js", 13], ["invoke-implementation.js", 1]] as const) {
      const path = join(esm, file);
      const result = hoistGeneratorClosures(nativeAsyncGenerators(readFileSync(path, "utf8"), path).code, path);
      assert.deepEqual(result.skipped, [], file);
      assert.ok(result.count >= least, `${file}: ${result.count} moved, at least ${least} expected`);
    }
  });
});
