// Moves generator functions that a dependency creates on every call out to module level, for the bundle.
//
// Why: V8 gives every generator function (`function*`, `async function*`) its own initial map the first time it
// makes a generator from it. Maps are allocated in the old generation, and an initial map points back to its
// function, so the function, its context and everything the context holds survive every young-generation
// collection until the next full one. Connect's server pipeline creates about ten such functions per call
// (`transformSerializeEnvelope(…)` and its siblings return a new `async function*` closing over their arguments,
// and the unary stage closes over the call's context; see
// https://github.com/connectrpc/connect-es/blob/main/packages/connect/src/protocol/async-iterable.ts), so every
// call's request, context and stream objects were moved to the old generation: some 10 KB per call.
//
// The rewrite is closure conversion: a generator function expression nested in another function becomes a
// module-level generator function that takes the bindings it used from its enclosing functions as leading
// parameters, and the expression becomes an arrow function passing them: `return async function* (it) { … s … }`
// becomes `return (it) => stage$1(s, it)` with `async function* stage$1(s, it) { … s … }`. One generator function
// exists per module, so its map is made once; the per-call arrow function is an ordinary closure that dies young.
//
// Passing a binding by value is the same as closing over it only when the binding never changes after the
// function is created, so a generator is rewritten only when every binding it takes is initialised before it
// (a parameter, a hoisted function, or a declaration earlier in the text, not a `var` in a loop) and never
// assigned again, and when it does not use `this`, `arguments`, `new.target` or `super`, or refer to itself by
// name. Anything else is left as it is (it behaves the same, it only keeps its memory longer) and reported with
// the reason; a test requires that none of Connect's server pipeline is left, so a change in Connect that stops
// the rewrite fails it.
import ts from "typescript";

const { factory } = ts;

export interface Hoisted {
  readonly code: string;
  /** Generator functions moved to module level. */
  readonly count: number;
  /** Nested generator functions left in place, each with where it is and why. */
  readonly skipped: readonly string[];
}

function where(node: ts.Node): string {
  const source = node.getSourceFile();
  const { line, character } = source.getLineAndCharacterOfPosition(node.getStart());
  return `${source.fileName}:${line + 1}:${character + 1}`;
}

/** A one-file program, so that the checker resolves each identifier to its declaration. */
function checkedSource(code: string, fileName: string): { source: ts.SourceFile; checker: ts.TypeChecker } {
  const options: ts.CompilerOptions = { allowJs: true, noLib: true, noResolve: true, target: ts.ScriptTarget.Latest, module: ts.ModuleKind.ESNext, types: [] };
  const source = ts.createSourceFile(fileName, code, ts.ScriptTarget.Latest, true, ts.ScriptKind.JS);
  const host: ts.CompilerHost = {
    getSourceFile: (name) => (name === fileName ? source : undefined),
    getDefaultLibFileName: () => "lib.d.ts",
    writeFile: () => undefined,
    getCurrentDirectory: () => "/",
    getCanonicalFileName: (name) => name,
    useCaseSensitiveFileNames: () => true,
    getNewLine: () => "\n",
    fileExists: (name) => name === fileName,
    readFile: (name) => (name === fileName ? code : undefined),
  };
  const program = ts.createProgram({ rootNames: [fileName], options, host });
  return { source, checker: program.getTypeChecker() };
}

/** Whether `node` is a place a value is written to: an assignment's target, `++`/`--`, or a for-in/of's variable. */
function isWritten(node: ts.Identifier): boolean {
  let child: ts.Node = node;
  let parent = node.parent;
  // Up through destructuring patterns in an assignment: `[a, b] = …`, `({ a, b: c } = …)`.
  while (
    ts.isParenthesizedExpression(parent) || ts.isArrayLiteralExpression(parent) || ts.isSpreadElement(parent)
    || ts.isShorthandPropertyAssignment(parent) || ts.isSpreadAssignment(parent)
    || (ts.isPropertyAssignment(parent) && parent.initializer === child) || ts.isObjectLiteralExpression(parent)
  ) {
    child = parent;
    parent = parent.parent;
  }
  if (ts.isBinaryExpression(parent) && parent.left === child) {
    const op = parent.operatorToken.kind;
    return op >= ts.SyntaxKind.FirstAssignment && op <= ts.SyntaxKind.LastAssignment;
  }
  if ((ts.isPrefixUnaryExpression(parent) || ts.isPostfixUnaryExpression(parent))
    && (parent.operator === ts.SyntaxKind.PlusPlusToken || parent.operator === ts.SyntaxKind.MinusMinusToken)) return true;
  return (ts.isForInStatement(parent) || ts.isForOfStatement(parent)) && parent.initializer === child;
}

/** Whether `node` is an identifier that reads or writes a binding (not a property name, a label, …). */
function isReference(node: ts.Identifier): boolean {
  const parent = node.parent;
  if (ts.isPropertyAccessExpression(parent) && parent.name === node) return false;
  if ((ts.isPropertyAssignment(parent) || ts.isMethodDeclaration(parent) || ts.isPropertyDeclaration(parent)
    || ts.isGetAccessorDeclaration(parent) || ts.isSetAccessorDeclaration(parent)) && parent.name === node) return false;
  if ((ts.isLabeledStatement(parent) || ts.isBreakOrContinueStatement(parent)) && parent.label === node) return false;
  if (ts.isBindingElement(parent) && parent.propertyName === node) return false;
  if (ts.isMetaProperty(parent)) return false;
  if ((ts.isImportSpecifier(parent) || ts.isExportSpecifier(parent)) && parent.propertyName === node) return false;
  return true;
}

/** The symbol an identifier in an expression refers to (a shorthand `{ a }` refers to the binding `a`). */
function symbolOf(checker: ts.TypeChecker, node: ts.Identifier): ts.Symbol | undefined {
  return ts.isShorthandPropertyAssignment(node.parent) && node.parent.name === node
    ? checker.getShorthandAssignmentValueSymbol(node.parent)
    : checker.getSymbolAtLocation(node);
}

/** The function a declaration's binding belongs to, or undefined for a module-level one. */
function scopeOf(declaration: ts.Node): ts.SignatureDeclaration | undefined {
  return ts.findAncestor(declaration.parent, ts.isFunctionLike);
}

/** Why a captured binding cannot be passed by value, or undefined when it can. */
function capturedBindingProblem(checker: ts.TypeChecker, symbol: ts.Symbol, generator: ts.FunctionExpression, scope: ts.Node): string | undefined {
  const declarations = symbol.declarations ?? [];
  const [declaration] = declarations;
  if (declaration === undefined || declarations.length !== 1) return `${symbol.name} has ${declarations.length} declarations`;
  const initialisedBefore = ts.isParameter(declaration) || ts.isFunctionDeclaration(declaration)
    || ((ts.isVariableDeclaration(declaration) || ts.isBindingElement(declaration) || ts.isClassDeclaration(declaration)) && declaration.end <= generator.pos);
  if (!initialisedBefore) return `${symbol.name} is declared after it`;
  // A `var` initialiser in a loop assigns the same binding again on every pass.
  const functionScoped = (ts.isVariableDeclaration(declaration) || ts.isBindingElement(declaration)) && (ts.getCombinedNodeFlags(declaration) & ts.NodeFlags.BlockScoped) === 0;
  if (functionScoped && ts.findAncestor(declaration, (n) => n === scope || ts.isIterationStatement(n, false)) !== scope) return `${symbol.name} is a var in a loop`;
  const writes = (node: ts.Node): boolean =>
    (ts.isIdentifier(node) && node.text === symbol.name && isReference(node) && isWritten(node) && symbolOf(checker, node) === symbol)
    || (ts.forEachChild(node, (child) => writes(child) || undefined) ?? false);
  return writes(scope) ? `${symbol.name} is assigned` : undefined;
}

/**
 * Moves every generator function expression nested in another function to module level (see above) when that
 * keeps its behaviour; reports the others.
 */
export function hoistGeneratorClosures(code: string, fileName: string): Hoisted {
  const { source, checker } = checkedSource(code, fileName);
  const taken = new Set<string>();
  const collect = (node: ts.Node): void => {
    if (ts.isIdentifier(node)) taken.add(node.text);
    ts.forEachChild(node, collect);
  };
  collect(source);
  const skipped: string[] = [];
  const hoisted: ts.FunctionDeclaration[] = [];

  /** The bindings of enclosing functions that `generator` uses, in order of first use; or why it cannot move. */
  const captures = (generator: ts.FunctionExpression): ts.Identifier[] | string => {
    const used = new Set<ts.Symbol>();
    // The first reason found not to move it, or undefined.
    const visit = (node: ts.Node, ownFunction: boolean): string | undefined => {
      if (node.kind === ts.SyntaxKind.ThisKeyword || node.kind === ts.SyntaxKind.SuperKeyword) {
        return ownFunction ? `it uses ${node.getText()}` : undefined;
      }
      if (ts.isMetaProperty(node) && ownFunction) return "it uses new.target";
      if (ts.isIdentifier(node) && isReference(node)) {
        if (node.text === "arguments" && ownFunction) return "it uses arguments";
        const symbol = symbolOf(checker, node);
        const declaration = symbol?.declarations?.[0];
        if (symbol !== undefined && declaration !== undefined && !used.has(symbol)) {
          if (declaration === generator) return `it refers to itself as ${symbol.name}`;
          const scope = scopeOf(declaration);
          const inside = declaration.pos >= generator.pos && declaration.end <= generator.end;
          if (scope !== undefined && !inside) {
            used.add(symbol);
            const problem = capturedBindingProblem(checker, symbol, generator, scope);
            if (problem !== undefined) return problem;
          }
        }
      }
      // A nested ordinary function has its own `this` and `arguments`; an arrow function shares the generator's.
      const own = ownFunction && !(ts.isFunctionLike(node) && !ts.isArrowFunction(node));
      return ts.forEachChild(node, (child) => visit(child, own));
    };
    const problem = [...generator.parameters, generator.body].reduce<string | undefined>(
      (found, node) => found ?? visit(node, true),
      undefined,
    );
    return problem ?? [...used].map((symbol) => factory.createIdentifier(symbol.name));
  };

  const uniqueName = (base: string): string => {
    let name = base;
    for (let n = 2; taken.has(name); n++) name = `${base}${n}`;
    taken.add(name);
    return name;
  };

  const transformer = (context: ts.TransformationContext) => {
    const visit = (node: ts.Node): ts.Node => {
      if (ts.isFunctionExpression(node) && node.asteriskToken !== undefined && scopeOf(node) !== undefined) {
        const captured = captures(node);
        if (typeof captured === "string") {
          skipped.push(`${where(node)}: ${captured}`);
          return ts.visitEachChild(node, visit, context);
        }
        const enclosing = scopeOf(node);
        const base = node.name?.text ?? `${enclosing?.name !== undefined && ts.isIdentifier(enclosing.name) ? enclosing.name.text : "anonymous"}Generator`;
        const name = uniqueName(base);
        const simple = node.parameters.every((p) => ts.isIdentifier(p.name) && p.initializer === undefined && p.dotDotDotToken === undefined);
        const parameters = captured.map((id) => factory.createParameterDeclaration(undefined, undefined, id.text));
        hoisted.push(factory.createFunctionDeclaration(node.modifiers, node.asteriskToken, name, undefined, [...parameters, ...node.parameters], undefined, node.body));
        // `(a, b) => name(captured…, a, b)`; with defaults, patterns or a rest parameter, `(...args) => name(captured…, ...args)`.
        const forwarded = simple ? node.parameters.map((p) => factory.createIdentifier((p.name as ts.Identifier).text)) : [];
        const arrowParameters = simple
          ? node.parameters.map((p) => factory.createParameterDeclaration(undefined, undefined, (p.name as ts.Identifier).text))
          : [factory.createParameterDeclaration(undefined, factory.createToken(ts.SyntaxKind.DotDotDotToken), "args")];
        const args = simple ? forwarded : [factory.createSpreadElement(factory.createIdentifier("args"))];
        const call = factory.createCallExpression(factory.createIdentifier(name), undefined, [...captured.map((id) => factory.createIdentifier(id.text)), ...args]);
        return factory.createParenthesizedExpression(factory.createArrowFunction(undefined, undefined, arrowParameters, undefined, undefined, call));
      }
      return ts.visitEachChild(node, visit, context);
    };
    return visit;
  };

  const result = ts.transform(source, [(context) => (file) => ts.visitNode(file, transformer(context)) as ts.SourceFile]);
  const [transformed] = result.transformed;
  if (transformed === undefined) throw new Error(`${fileName}: nothing came out of the transform`);
  if (hoisted.length === 0) {
    result.dispose();
    return { code, count: 0, skipped };
  }
  const file = factory.updateSourceFile(transformed, [...transformed.statements, ...hoisted]);
  const printed = ts.createPrinter().printFile(file);
  result.dispose();
  return { code: printed, count: hoisted.length, skipped };
}
