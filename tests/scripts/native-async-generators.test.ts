// The bundle's rewrite of tsc-lowered async generators: each scenario runs against the same source three ways —
// compiled natively (ES2022), lowered by tsc (ES2017, as @connectrpc/connect is published) and lowered then
// rewritten — and the rewritten module must behave exactly as the native one.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import ts from "typescript";
import { nativeAsyncGenerators } from "../../scripts/native-async-generators.ts";

const SOURCE = `
export async function* numbers(n) { for (let i = 0; i < n; i++) yield await Promise.resolve(i); return "done"; }
export async function* doubled(source) { for await (const x of source) yield x * 2; }
export async function* delegating(log) { const r = yield* numbers(2); log.push("delegate returned " + r); yield* [10, 11]; }
export async function* guarded(log) { try { yield 1; yield 2; } finally { log.push("finally"); await null; log.push("after an await in finally"); } }
export async function* failing() { yield 1; throw new Error("boom"); }
export async function* catching(log) { try { yield 1; } catch (e) { log.push("caught " + e.message); yield 2; } }
export async function* twoWay() { const a = yield "first"; const b = yield "got " + a; return "end " + b; }
export function stage(factor) { return async function* (iterable) { for await (const x of iterable) yield x * factor; }; }
export class Box { constructor(items) { this.items = items; } async *[Symbol.asyncIterator]() { for (const x of this.items) yield x; } }
export const holder = { base: 40, async *gen(extra) { yield this.base + extra; } };
export async function* counting() { yield arguments.length; }
export async function* nested() { const inner = async function* () { yield "inner"; }; yield* inner(); yield (async () => "arrow")(); }
export async function* awaitsRejection() { try { await Promise.reject(new Error("rejected")); } catch (e) { yield e.message; } }
export async function* yieldsPromise() { yield Promise.resolve("resolved by yield"); }
export async function* returnsAwaited() { return Promise.resolve("awaited return"); }
export async function* commaOperand() { let a = 0; yield (a++, a + 1); await (a++, null); yield a; }
`;

type Gen = AsyncGenerator<unknown, unknown, unknown>;

/** What SOURCE exports. */
interface Module {
  numbers(n: number): Gen;
  doubled(source: AsyncIterable<unknown>): Gen;
  delegating(log: string[]): Gen;
  guarded(log: string[]): Gen;
  failing(): Gen;
  catching(log: string[]): Gen;
  twoWay(): Gen;
  stage(factor: number): (iterable: AsyncIterable<unknown>) => Gen;
  Box: new (items: number[]) => AsyncIterable<unknown>;
  holder: { gen(extra: number): Gen };
  counting(...args: number[]): Gen;
  nested(): Gen;
  awaitsRejection(): Gen;
  yieldsPromise(): Gen;
  returnsAwaited(): Gen;
  commaOperand(): Gen;
}
type Scenario = (m: Module) => Promise<unknown[]>;

async function steps(it: AsyncIterator<unknown>, sends: unknown[] = []): Promise<unknown[]> {
  const trace: unknown[] = [];
  for (let i = 0; i < 20; i++) {
    try {
      const r = await it.next(sends[i]);
      trace.push(r);
      if (r.done === true) break;
    } catch (e) {
      trace.push(`threw ${(e as Error).message}`);
      break;
    }
  }
  return trace;
}

const scenarios: Record<string, Scenario> = {
  "yields awaited values and returns": (m) => steps(m.numbers(3)),
  "for await over another generator": (m) => steps(m.doubled(m.numbers(3))),
  "yield* to an async and a sync iterable, and the delegate's return value": async (m) => {
    const log: string[] = [];
    return [...(await steps(m.delegating(log))), ...log];
  },
  "finally on an early return, with an await in it": async (m) => {
    const log: string[] = [];
    const it = m.guarded(log);
    const first = await it.next();
    const returned = await it.return("early");
    return [first, returned, await it.next(), ...log];
  },
  "a break out of for await runs finally": async (m) => {
    const log: string[] = [];
    for await (const x of m.guarded(log)) {
      log.push(`got ${String(x)}`);
      break;
    }
    return log;
  },
  "an error thrown inside": (m) => steps(m.failing()),
  "an error thrown in by the consumer": async (m) => {
    const log: string[] = [];
    const it = m.catching(log);
    return [await it.next(), await it.throw(new Error("from outside")), await it.next(), ...log];
  },
  "values sent with next": (m) => steps(m.twoWay(), [undefined, "a", "b"]),
  "a generator made per call by a factory": (m) => steps(m.stage(3)(m.numbers(3))),
  "a class's async iterator method": async (m) => {
    const out: unknown[] = [];
    for await (const x of new m.Box([1, 2])) out.push(x);
    return out;
  },
  "an object literal's method keeps this": (m) => steps(m.holder.gen(2)),
  "arguments": (m) => steps(m.counting(1, 2, 3)),
  "a generator inside a generator, and an async arrow": (m) => steps(m.nested()),
  "a rejected await caught": (m) => steps(m.awaitsRejection()),
  "a yielded promise is awaited": (m) => steps(m.yieldsPromise()),
  "a returned promise is awaited": (m) => steps(m.returnsAwaited()),
  "comma expressions as operands": (m) => steps(m.commaOperand()),
  "return before the first next": async (m) => {
    const log: string[] = [];
    const it = m.guarded(log);
    return [await it.return("never started"), await it.next(), ...log];
  },
};

function compile(target: ts.ScriptTarget): string {
  return ts.transpileModule(SOURCE, { compilerOptions: { target, module: ts.ModuleKind.ESNext } }).outputText;
}

async function load<M = Module>(code: string): Promise<M> {
  return (await import(`data:text/javascript,${encodeURIComponent(code)}`)) as M;
}

describe("native async generators for the bundle", async () => {
  const lowered = compile(ts.ScriptTarget.ES2017);
  const rewritten = nativeAsyncGenerators(lowered, "lowered.js");
  const native = await load(compile(ts.ScriptTarget.ES2022));
  const asLowered = await load(lowered);
  const asRewritten = await load(rewritten.code);

  it("rewrites every lowered generator and leaves no helper call", () => {
    assert.match(lowered, /__asyncGenerator\(this, arguments, function\*/);
    assert.equal(rewritten.count, (SOURCE.match(/async \*|async function\*/g) ?? []).length);
    assert.doesNotMatch(rewritten.code, /__asyncGenerator\(this|yield __await\(|__asyncDelegator\(/);
  });

  for (const [name, scenario] of Object.entries(scenarios)) {
    it(`behaves as the native generator: ${name}`, async () => {
      const expected = await scenario(native);
      assert.deepEqual(await scenario(asLowered), expected, "the lowered module itself differs: the scenario does not test the rewrite");
      assert.deepEqual(await scenario(asRewritten), expected);
    });
  }

  it("refuses a yield that tsc would not write, naming where it is", () => {
    const odd = 'function f() {\n  return __asyncGenerator(this, arguments, function* () { yield 1; });\n}\n';
    assert.throws(() => nativeAsyncGenerators(odd, "odd.js"), /odd\.js:2:\d+: a yield that is not tsc's lowering/);
  });

  it("refuses a lowered generator it cannot take apart rather than leave it", () => {
    const extra = 'function f() {\n  const self = this;\n  return __asyncGenerator(this, arguments, function* () { yield yield __await(self); });\n}\n';
    assert.throws(() => nativeAsyncGenerators(extra, "extra.js"), /lowered async generators left after the rewrite: extra\.js:3:/);
  });

  it("leaves code without lowered generators as it was, apart from printing", async () => {
    const plain = "export function* sync() { yield 1; }\nexport const value = 2;\n";
    const result = nativeAsyncGenerators(plain, "plain.js");
    assert.equal(result.count, 0);
    const m = await load<{ sync(): Generator<number> }>(result.code);
    assert.deepEqual([...m.sync()], [1]);
  });
});
