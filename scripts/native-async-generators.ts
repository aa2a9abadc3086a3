// Turns TypeScript's ES2017 lowering of async generator functions back into native ones, for the bundle.
//
// Why: @connectrpc/connect is published compiled for ES2017, where tsc writes each `async function*` as a plain
// function returning `__asyncGenerator(this, arguments, function* () { … })`
// (https://github.com/microsoft/tslib/blob/main/tslib.js). Its server pipeline makes about ten such stages per
// call. V8 gives every generator function its own initial map the first time it makes a generator from it; maps
// live in the old generation and point back to their function, so each per-call inner `function*` survives
// every young-generation collection until the next full one, with its context: the stage's `iterable`, and
// through it the whole call (request, stream, buffers). That is some 15 KB moved into the old generation per
// unary call, about half of what a cluster-autoscaler loop promotes. A native `async function*` takes its
// iterable as a parameter, which lives in the generator's frame and dies with it; one still made per call keeps
// what it closes over, which hoist-generator-closures.ts (applied after this, to Connect) takes care of.
//
// The rewrite is the inverse of tsc's, node by node: the function whose whole body is
// `return __asyncGenerator(this, arguments, function* () { B })` becomes `async function* (…) { B' }`, where in
// B' `yield __await(x)` is `await x`, `yield yield __await(x)` is `yield x`, and
// `yield* __asyncDelegator(__asyncValues(x))` is `yield* x`. Anything else in that shape is refused, so a
// change in tsc's output fails the build instead of changing behaviour.
import { readFileSync } from "node:fs";
import type { Plugin } from "esbuild";
import ts from "typescript";
import { hoistGeneratorClosures } from "./hoist-generator-closures.ts";

const { factory } = ts;

export interface Rewritten {
  readonly code: string;
  /** How many async generator functions were made native. */
  readonly count: number;
}

/** True for a call of the helper `name` with the given number of arguments. */
function isHelperCall(node: ts.Node, name: string, args: number): node is ts.CallExpression {
  return ts.isCallExpression(node) && ts.isIdentifier(node.expression) && node.expression.text === name && node.arguments.length === args;
}

/** The inner `function*` of `return __asyncGenerator(this, arguments, function* () { … })`, the whole body of `fn`. */
function loweredGenerator(fn: ts.FunctionLikeDeclaration): ts.FunctionExpression | undefined {
  if (fn.asteriskToken !== undefined || fn.body === undefined || !ts.isBlock(fn.body) || fn.body.statements.length !== 1) return undefined;
  const [statement] = fn.body.statements;
  if (statement === undefined || !ts.isReturnStatement(statement) || statement.expression === undefined) return undefined;
  const call = statement.expression;
  if (!isHelperCall(call, "__asyncGenerator", 3)) return undefined;
  const [self, args, inner] = call.arguments;
  const plain = self?.kind === ts.SyntaxKind.ThisKeyword && args !== undefined && ts.isIdentifier(args) && args.text === "arguments";
  if (!plain || inner === undefined || !ts.isFunctionExpression(inner) || inner.asteriskToken === undefined || inner.parameters.length > 0) return undefined;
  return inner;
}

function where(node: ts.Node): string {
  const source = node.getSourceFile();
  const { line, character } = source.getLineAndCharacterOfPosition(node.getStart());
  return `${source.fileName}:${line + 1}:${character + 1}`;
}

/** Rewrites every lowered async generator function of `code`; throws, naming the place, on one it cannot. */
export function nativeAsyncGenerators(code: string, fileName: string): Rewritten {
  const source = ts.createSourceFile(fileName, code, ts.ScriptTarget.Latest, true, ts.ScriptKind.JS);
  let count = 0;

  // Inside a lowered generator's body: the helper protocol back to `await`, `yield` and `yield*`.
  const body = (context: ts.TransformationContext) => {
    const visit = (node: ts.Node): ts.Node => {
      if (ts.isFunctionLike(node)) return outer(context)(node);
      if (ts.isYieldExpression(node)) {
        const operand = node.expression;
        if (node.asteriskToken === undefined && operand !== undefined && isHelperCall(operand, "__await", 1)) {
          return factory.createAwaitExpression(ts.visitNode(operand.arguments[0], visit) as ts.Expression);
        }
        if (node.asteriskToken === undefined && operand !== undefined && ts.isYieldExpression(operand) && operand.asteriskToken === undefined
          && operand.expression !== undefined && isHelperCall(operand.expression, "__await", 1)) {
          return factory.createYieldExpression(undefined, ts.visitNode(operand.expression.arguments[0], visit) as ts.Expression);
        }
        if (node.asteriskToken !== undefined && operand !== undefined && isHelperCall(operand, "__asyncDelegator", 1)) {
          const [values] = operand.arguments;
          if (values !== undefined && isHelperCall(values, "__asyncValues", 1)) {
            return factory.createYieldExpression(factory.createToken(ts.SyntaxKind.AsteriskToken), ts.visitNode(values.arguments[0], visit) as ts.Expression);
          }
        }
        throw new Error(`${where(node)}: a yield that is not tsc's lowering of an async generator (${node.getText().slice(0, 80)})`);
      }
      return ts.visitEachChild(node, visit, context);
    };
    return visit;
  };

  // Anywhere else: find the functions tsc lowered.
  const outer = (context: ts.TransformationContext) => {
    const visit = (node: ts.Node): ts.Node => {
      if ((ts.isFunctionExpression(node) || ts.isFunctionDeclaration(node) || ts.isMethodDeclaration(node)) && node.body !== undefined) {
        const inner = loweredGenerator(node);
        if (inner !== undefined) {
          if (inner.name !== undefined && usesName(inner.body, inner.name.text)) {
            throw new Error(`${where(inner)}: the lowered generator ${inner.name.text} refers to itself`);
          }
          count++;
          const block = ts.visitEachChild(inner.body, body(context), context);
          const modifiers = [...(ts.getModifiers(node) ?? []), factory.createModifier(ts.SyntaxKind.AsyncKeyword)];
          const star = factory.createToken(ts.SyntaxKind.AsteriskToken);
          if (ts.isFunctionExpression(node)) return factory.updateFunctionExpression(node, modifiers, star, node.name, undefined, node.parameters, undefined, block);
          if (ts.isFunctionDeclaration(node)) return factory.updateFunctionDeclaration(node, modifiers, star, node.name, undefined, node.parameters, undefined, block);
          return factory.updateMethodDeclaration(node, modifiers, star, node.name, undefined, undefined, node.parameters, undefined, block);
        }
      }
      return ts.visitEachChild(node, visit, context);
    };
    return visit;
  };

  const result = ts.transform(source, [(context) => (file) => ts.visitNode(file, outer(context)) as ts.SourceFile]);
  const [transformed] = result.transformed;
  if (transformed === undefined) throw new Error(`${fileName}: nothing came out of the transform`);
  // Fail closed: a lowering left in place would keep the retention this exists to remove.
  const helpers = new Set(["__asyncGenerator", "__await", "__asyncDelegator", "__asyncValues"]);
  const remaining: string[] = [];
  const find = (node: ts.Node): void => {
    if (ts.isVariableDeclaration(node) && ts.isIdentifier(node.name) && helpers.has(node.name.text)) return; // the helpers themselves
    // __asyncValues is not among them: tsc also uses it for `for await` in plain async functions, which stay as they are.
    if (ts.isCallExpression(node) && ts.isIdentifier(node.expression) && ["__asyncGenerator", "__await", "__asyncDelegator"].includes(node.expression.text)) {
      remaining.push(where(ts.getOriginalNode(node)));
    }
    ts.forEachChild(node, find);
  };
  find(transformed);
  if (remaining.length > 0) throw new Error(`lowered async generators left after the rewrite: ${remaining.slice(0, 5).join(", ")}`);
  const printed = ts.createPrinter().printFile(transformed);
  result.dispose();
  return { code: printed, count };
}

function usesName(node: ts.Node, name: string): boolean {
  if (ts.isIdentifier(node) && node.text === name) return true;
  return ts.forEachChild(node, (child) => usesName(child, name) || undefined) ?? false;
}

/** Packages whose generator functions made per call are moved to module level (hoist-generator-closures.ts). */
const hoistIn = /[\\/]node_modules[\\/]@connectrpc[\\/]/;

/**
 * For esbuild: every dependency module with a lowered async generator is loaded rewritten, and Connect's modules
 * with their per-call generator functions moved to module level.
 */
export const nativeAsyncGeneratorsPlugin: Plugin = {
  name: "native-async-generators",
  setup(build) {
    build.onLoad({ filter: /[\\/]node_modules[\\/].*\.js$/ }, (args) => {
      const original = readFileSync(args.path, "utf8");
      let code = original;
      if (code.includes("__asyncGenerator(this, arguments")) code = nativeAsyncGenerators(code, args.path).code;
      if (hoistIn.test(args.path) && code.includes("function*")) code = hoistGeneratorClosures(code, args.path).code;
      return code === original ? undefined : { contents: code, loader: "js" };
    });
  },
};
